package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// Claims is how items are claimed.
type Claims string

// The claim modes.
const (
	ClaimSingle  Claims = "single"        // one UpdateItem per claim
	ClaimBatch   Claims = "batch"         // BatchClaims: TransactWriteItems of up to 25
	CompleteOnly Claims = "complete-only" // no claim, one conditional write per item
)

// Outcome is what the handler does.
type Outcome string

// The handler outcomes. One item (a single one, so that no other item's retry schedules the pass
// a lost retry write needs) fails or panics once; items 0 and 6 fail permanently; item 0 overstays.
const (
	OutcomeSucceed   Outcome = "succeed"
	OutcomeFailOnce  Outcome = "fail-then-succeed" // item 5: a transient error on the first attempt
	OutcomePermanent Outcome = "fail-permanently"  // items 0 and 6: worker.Permanent on every attempt
	OutcomePanic     Outcome = "panic"             // item 5: a panic on the first attempt
	OutcomeExceed    Outcome = "exceed-claim"      // runs past its claim's end, ignoring ctx for a while, then succeeds
	OutcomeEffects   Outcome = "effects"           // succeeds with effects: the item's fx + 1 and the run's counter + 1
)

// Combo is one combination of settings.
type Combo struct {
	Ledger  worker.LedgerKind
	Claims  Claims
	Mode    scan.Mode
	Outcome Outcome
	Workers int
}

func (c Combo) String() string {
	return fmt.Sprintf("%s.%s.%s.%s.w%d", c.Ledger, c.Claims, c.Mode, c.Outcome, c.Workers)
}

// Case is one run: a combination with at most one fault (Fault.At == 0: none).
type Case struct {
	Combo
	Fault ddbfault.Fault
}

func (c Case) String() string {
	if c.Fault.At == 0 {
		return c.Combo.String() + "/fault-free"
	}
	return fmt.Sprintf("%s/%s/k%d", c.Combo, c.Fault.Kind, c.Fault.At)
}

// Combos is the full cross product, in a stable order.
func Combos() []Combo {
	var out []Combo
	for _, w := range []int{1, 2} {
		for _, l := range []worker.LedgerKind{worker.LedgerInline, worker.LedgerTable} {
			for _, cl := range []Claims{ClaimSingle, ClaimBatch, CompleteOnly} {
				for _, m := range []scan.Mode{scan.ModeSegment, scan.ModeFilter, scan.ModeIndex} {
					for _, o := range []Outcome{OutcomeSucceed, OutcomeFailOnce, OutcomePermanent, OutcomePanic, OutcomeExceed, OutcomeEffects} {
						out = append(out, Combo{Ledger: l, Claims: cl, Mode: m, Outcome: o, Workers: w})
					}
				}
			}
		}
	}
	return out
}

// ParseCase reads a Case from its String form.
func ParseCase(s string) (Case, error) {
	parts := strings.Split(s, "/")
	bad := fmt.Errorf("sweep: case %q is not ledger.claims.mode.outcome.wN[/kind/kK]", s)
	f := strings.Split(parts[0], ".")
	if len(f) != 5 || !strings.HasPrefix(f[4], "w") {
		return Case{}, bad
	}
	w, err := strconv.Atoi(f[4][1:])
	if err != nil {
		return Case{}, bad
	}
	c := Case{Combo: Combo{Ledger: worker.LedgerKind(f[0]), Claims: Claims(f[1]), Mode: scan.Mode(f[2]), Outcome: Outcome(f[3]), Workers: w}}
	if len(parts) == 1 || parts[1] == "fault-free" {
		return c, nil
	}
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "k") {
		return Case{}, bad
	}
	if c.Fault.Kind, err = ddbfault.ParseKind(parts[1]); err != nil {
		return Case{}, err
	}
	if c.Fault.At, err = strconv.ParseInt(parts[2][1:], 10, 64); err != nil {
		return Case{}, bad
	}
	return c, nil
}
