package work

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/worker"
)

// TestExecExitRacesTimeout (from a review): CMD exits on its own at about the moment
// --exec-timeout fires (300 timeouts from 0.5 to 3.5 ms): its own status must be kept
// (65 permanent, 0 success) whenever it exited, and "killed" said only when it was; before
// exitResult, about 1 in 10 exits 0 were reported as killed (the context's end) and retried.
func TestExecExitRacesTimeout(t *testing.T) {
	it := worker.Item{Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "a"}},
		Attrs: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "a"}}}
	for _, code := range []int{0, 65} {
		counts := map[string]int{}
		for i := 0; i < 300; i++ {
			timeout := time.Duration(500+i*10) * time.Microsecond
			err := execRun(context.Background(), execCall{command: fmt.Sprintf("exit %d", code), timeout: timeout, stdout: new(limitedBuffer)}, it)
			var k *killedError
			switch {
			case err == nil:
				counts["ok"]++
			case errors.As(err, &k):
				counts["killed: "+k.How]++
			case errors.As(err, new(*worker.PermanentError)):
				counts["permanent: "+err.Error()]++
			default:
				counts["other: "+err.Error()]++
			}
		}
		t.Logf("exit %d: %v", code, counts)
		for k, n := range counts {
			// A CMD that exited on its own (0 or 65) and was not killed by the signal must keep its status.
			// "not started": the timeout ended before CMD could start (under load, at 0.5 ms).
			if k != "ok" && k != "killed: signal: killed" && k != "permanent: permanent: exit status 65" && !strings.HasPrefix(k, "killed: not started: ") {
				t.Errorf("exit %d reported as %q (%d of 300 runs)", code, k, n)
			}
		}
	}
}
