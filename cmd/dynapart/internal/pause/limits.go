package pause

import (
	"math"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
)

// checkLimits refuses a --max-wcu or --max-rcu given as anything but a finite number above 0,
// naming the flag and the value: 0 used to be taken as the flag left out (a resume without the
// budget asked for), and NaN reached DynamoDB, which refused the budget's write (exit 1).
func checkLimits(cmd *cobra.Command, limits lock.Limits) error {
	for _, l := range []struct {
		flag, unit string
		v          float64
	}{{"max-wcu", "WCU", limits.WCU}, {"max-rcu", "RCU", limits.RCU}} {
		if cmd.Flags().Changed(l.flag) && !(l.v > 0 && !math.IsInf(l.v, 1)) { // NaN fails every comparison
			return cli.Usagef("--%s must be a finite number > 0 (the %s the group may consume in all; leave it out "+
				"to keep the budget), got %g (nothing written)", l.flag, l.unit, l.v)
		}
	}
	return nil
}
