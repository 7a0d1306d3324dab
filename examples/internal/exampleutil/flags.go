package exampleutil

import (
	"fmt"
	"os"
)

// AtLeast is a minimum for an int flag (see CheckFlags): Value is the flag's variable, read once
// the flags are parsed.
type AtLeast struct {
	Flag  string
	Value *int
	Min   int
}

// CheckFlags exits 2 before anything is created, naming the flag, when a flag is below its
// minimum: an example run with a size that cannot show its story says so instead of showing
// nothing (or panicking).
func CheckFlags(mins ...AtLeast) {
	for _, m := range mins {
		if *m.Value < m.Min {
			fmt.Fprintf(os.Stderr, "-%s %d: must be at least %d\n", m.Flag, *m.Value, m.Min)
			os.Exit(2)
		}
	}
}
