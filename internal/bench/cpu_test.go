package bench

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListenerPID finds this process by a port it listens on, and nothing on a closed port.
func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.Equal(t, os.Getpid(), listenerPID(fmt.Sprintf("http://127.0.0.1:%d", port)))
	require.NoError(t, ln.Close())
	require.Zero(t, listenerPID(fmt.Sprintf("http://127.0.0.1:%d", port)))
	require.Zero(t, listenerPID("https://dynamodb.us-east-1.amazonaws.com"))

	_, err = procCPU(os.Getpid())
	require.NoError(t, err)
	_, err = procCPU(1 << 30)
	require.Error(t, err)
}

// TestCPUScenario runs a tiny cpu scenario on DynamoDB Local and checks its report.
func TestCPUScenario(t *testing.T) {
	env, res := quickRun(t, Options{Reps: 1, Items: 200, Quick: true, Only: []string{ScenarioCPU}})
	require.Empty(t, res.Errors)
	c := res.CPU
	require.NotNil(t, c)
	server := listenerPID(env.Endpoint) != 0
	require.Equal(t, server, c.ServerPID != 0)
	for _, v := range cpuVariants {
		p := c.Point(v)
		require.NotNil(t, p, v)
		require.Len(t, p.ItemsPerSec, 1, v)
		require.Positive(t, p.ClientUS.Min(), v)
		require.Positive(t, p.Allocs.Min(), v)
		if server {
			require.Len(t, p.ServerUS, 1, v)
		}
	}
	md := res.Markdown(nil)
	require.Contains(t, md, "## Where the CPU goes at concurrency 16")
	require.Contains(t, md, "| CPU per item, Run complete-only minus the hand loop, c=16 |")
	require.Regexp(t, `more client CPU per item than the hand loop \(-?\d+% .*more than the loop's\)`, md)
	if server {
		require.Regexp(t, `on Run's requests than on the loop's \(-?\d+% .*more\)`, md)
	}
	for _, v := range cpuVariants {
		require.True(t, strings.Contains(md, "| "+v+" | "), v)
	}
}
