package chaos

import (
	"bytes"
	"sync"
)

var bufMu sync.Mutex

func lockedWrite(b *bytes.Buffer, p []byte) (int, error) {
	bufMu.Lock()
	defer bufMu.Unlock()
	return b.Write(p)
}

func lockedString(b *bytes.Buffer) string {
	bufMu.Lock()
	defer bufMu.Unlock()
	return b.String()
}
