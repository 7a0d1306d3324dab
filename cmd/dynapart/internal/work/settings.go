package work

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// settingFlags are the `work` flags of the worker settings (worker.Settings): each setting with a
// flag is bound to its field of cfg, with the name, help and default of its row.
type settingFlags struct {
	cfg worker.Config
	// narrow moves the int32 fields' flags (read as int) into cfg, refusing what does not fit.
	narrow []func() error
}

// cliDefaults are the flags whose default differs from the library's: the library computes
// PageSize's (1000, or the scan package's automatic size with ReadRate); the CLI sends 1000.
var cliDefaults = map[string]any{"page-size": int32(1000)}

// cliHelp is what a flag's help says besides its row's: what zero means where the CLI's default
// is not the library's.
var cliHelp = map[string]string{"page-size": "; 0 with --read-rate: pages sized to the rate (refused without it)"}

// add defines a flag for every worker setting that has one.
func (f *settingFlags) add(fl *pflag.FlagSet) {
	cfg := reflect.ValueOf(&f.cfg).Elem()
	for _, s := range worker.Settings() {
		if s.Flag == "" {
			continue
		}
		def, ok := cliDefaults[s.Flag]
		if !ok {
			def = s.Default
		}
		s.Help += cliHelp[s.Flag]
		f.bind(fl, s, cfg.FieldByName(s.Field).Addr().Interface(), def)
	}
}

// bind defines the flag of s on field, a pointer to its Config field, with the default def (nil:
// the zero value).
func (f *settingFlags) bind(fl *pflag.FlagSet, s worker.Setting, field, def any) {
	switch p := field.(type) {
	case *string:
		fl.StringVar(p, s.Flag, valueOr[string](def), s.Help)
	case *scan.Mode:
		fl.StringVar((*string)(p), s.Flag, string(valueOr[scan.Mode](def)), s.Help)
	case *worker.LedgerKind:
		fl.StringVar((*string)(p), s.Flag, string(valueOr[worker.LedgerKind](def)), s.Help)
	case *bool:
		fl.BoolVar(p, s.Flag, valueOr[bool](def), s.Help)
	case *int:
		fl.IntVar(p, s.Flag, valueOr[int](def), s.Help)
	case *int32:
		f.bindInt32(fl, s, p, valueOr[int32](def))
	case *float64:
		fl.Float64Var(p, s.Flag, valueOr[float64](def), s.Help)
	case *time.Duration:
		fl.DurationVar(p, s.Flag, valueOr[time.Duration](def), s.Help)
	default:
		panic(fmt.Sprintf("worker setting %s: no flag for a %T", s.Field, field))
	}
}

// bindInt32 reads an int32 field's flag as an int, as --help has always shown it; check narrows
// it into the field, or refuses it naming the flag.
func (f *settingFlags) bindInt32(fl *pflag.FlagSet, s worker.Setting, field *int32, def int32) {
	n := new(int)
	fl.IntVar(n, s.Flag, int(def), s.Help)
	f.narrow = append(f.narrow, func() error {
		if *n < math.MinInt32 || *n > math.MaxInt32 {
			return cli.Usagef("--%s %d: out of range (worker.Config.%s is an int32)", s.Flag, *n, s.Field)
		}
		*field = int32(*n)
		return nil
	})
}

// check moves the flags that need it into the Config, and refuses a setting given as its zero
// value where the library takes zero for the default (zeroGiven); changed says whether a flag was
// given (on the command line or in the environment).
func (f *settingFlags) check(changed func(flag string) bool) error {
	for _, narrow := range f.narrow {
		if err := narrow(); err != nil {
			return err
		}
	}
	if err := f.pageSizeZero(changed); err != nil {
		return err
	}
	return f.zeroGiven(changed)
}

// pageSizeZero refuses --page-size 0 without --read-rate: worker.Config takes a zero PageSize for
// its computed default, which is 1000 (the CLI's default) without ReadRate, so 0 ran with 1000
// unsaid; with --read-rate it is the scan package's pages sized to the rate, a setting of its own.
func (f *settingFlags) pageSizeZero(changed func(flag string) bool) error {
	if !changed("page-size") || f.cfg.PageSize != 0 || f.cfg.ReadRate > 0 {
		return nil
	}
	return cli.Usagef("--page-size 0 would mean the default, 1000, without --read-rate (with it, pages sized to the rate): " +
		"give another value, or leave --page-size out for the default")
}

// zeroGiven refuses a setting flag given as the zero value of its type (0, 0s, "") when its row
// has a default (Default, or a computed one it names in ZeroMeans) and applies to the run (its Scope: DYNAPART_LEDGER_TABLE= set for init does not
// stop an inline-ledger worker): worker.Config takes zero for that default, so --max-attempts 0
// ran with 5 and --lease-table "" used dynapart-leases, unsaid. Booleans are left alone (false
// is a value).
func (f *settingFlags) zeroGiven(changed func(flag string) bool) error {
	cfg := reflect.ValueOf(&f.cfg).Elem()
	run := f.cfg // the mode and ledger that decide the scopes, defaults filled in
	if run.Mode == "" {
		run.Mode = scan.ModeSegment
	}
	if run.Ledger == "" {
		run.Ledger = worker.LedgerInline
	}
	for _, s := range worker.Settings() {
		def := s.Default
		if def == nil && s.ZeroMeans != "" {
			def = s.ZeroMeans
		}
		if s.Flag == "" || def == nil || !changed(s.Flag) || !s.Scope.Covers(run) {
			continue
		}
		v := cfg.FieldByName(s.Field)
		if v.Kind() == reflect.Bool || !v.IsZero() {
			continue
		}
		given := fmt.Sprint(v.Interface())
		if v.Kind() == reflect.String {
			given = `""`
		}
		return cli.Usagef("--%s %s would mean the default, %v: give another value, or leave --%s out for the default", s.Flag, given, def, s.Flag)
	}
	return nil
}

// valueOr is def as a T, or T's zero value when def is nil.
func valueOr[T any](def any) T {
	v, _ := def.(T)
	return v
}
