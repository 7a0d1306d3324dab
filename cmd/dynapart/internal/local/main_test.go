package local_test

import (
	"testing"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }
