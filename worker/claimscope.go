package worker

import (
	"crypto/sha256"
	"encoding/base64"
)

// claimScope is what a claim's lease token counts in: the lease table and the group, as 11
// characters (64 bits of a SHA-256), so every claim carries it at little cost. Two workers with the
// same scope hold tokens of the same slot sequence; only then does a larger token mean a later
// holder of the same slot (see ClaimRequest.Scope).
func claimScope(c Config) string {
	sum := sha256.Sum256([]byte(c.LeaseTable + "\x00" + c.Group))
	return base64.RawURLEncoding.EncodeToString(sum[:8])
}
