package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFakeFiresOnlyWhenDue(t *testing.T) {
	f := NewFake(time.Unix(1000, 0))
	ch := f.After(10 * time.Second)
	f.Advance(9 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Second)
	require.Equal(t, time.Unix(1010, 0), <-ch)
	require.Equal(t, 0, f.Waiters())
}

func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	go func() { <-f.After(time.Second) }()
	require.True(t, f.BlockUntil(1, nil))
	f.Advance(time.Second)
}
