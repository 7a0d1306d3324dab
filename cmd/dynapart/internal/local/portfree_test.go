package local_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestLocalPortInUse: `local --port P` where another server (here one that answers as DynamoDB
// Local does, to any request) listens on P exits 2 at once naming --port, and announces no
// endpoint. It used to take the other server's answer for its own readiness, print the endpoint
// and then exit 1 when its own server could not bind.
func TestLocalPortInUse(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#MissingAuthenticationToken"}`)
	}))
	defer other.Close()
	port := other.Listener.Addr().(*net.TCPAddr).Port

	c := clitest.New(t)
	stdout, stderr, code := c.Run("local", "--port", fmt.Sprint(port))
	require.Equal(t, 2, code, "stdout: %s\nstderr: %s", stdout, stderr)
	require.Empty(t, stdout, "no endpoint announced")
	require.Contains(t, stderr, fmt.Sprintf("--port %d: 127.0.0.1:%d is already in use", port, port))
	require.Contains(t, stderr, "give another --port")
	require.NotContains(t, stderr, "is running")
}
