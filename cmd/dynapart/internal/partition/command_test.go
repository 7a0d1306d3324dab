package partition_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

func TestPartitionCommand(t *testing.T) {
	c := clitest.New(t)
	out := c.MustRun("partition", "--workers", "4", "--type", "N", "--", "1", "2", "7", "-5", "12345678901234567890123456789012345678")
	require.Equal(t, "1\t1\n2\t2\n7\t3\n-5\t3\n12345678901234567890123456789012345678\t2\n", out)
}
