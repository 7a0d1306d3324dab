package local

import (
	"net"
	"strconv"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// checkPortFree refuses (exit 2, nothing started) a --port that something already listens on. The
// server Start launches is ready once the port answers HTTP, and another server on it (another
// DynamoDB Local) would answer for it: the new one would be announced as running, then fail to
// bind and exit.
func checkPortFree(port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return cli.Usagef("--port %d: %s is already in use (%v), perhaps by a DynamoDB Local already running "+
			"(to use it: export DYNAPART_ENDPOINT=http://%s); stop what listens there, or give another --port", port, addr, err, addr)
	}
	return l.Close()
}
