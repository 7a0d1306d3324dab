package cli

import (
	"slices"
	"strconv"
)

// ItemEnv is what `work --exec` tells CMD about the item it runs for, in its environment (the item
// itself is on CMD's stdin). Its variables are one item's, not settings: in a command CMD runs,
// BindEnv takes no flag from them, so that `dynapart redrive --table T` run by CMD does not take
// the item's key for its own --key (DYNAPART_KEY is that flag's variable name too; elsewhere it
// still sets --key, e.g. init's key spec). The names are a
// public contract (README, work --help).
type ItemEnv struct {
	Key            []byte // the item's key as JSON
	Slot, Attempt  int
	Token          int64
	IdempotencyKey string
	Version        string // the item's content version (--follow), else empty
}

// vars are e's variables as name and value, in the order the docs list them.
func (e ItemEnv) vars() [][2]string {
	return [][2]string{
		{"DYNAPART_KEY", string(e.Key)},
		{"DYNAPART_SLOT", strconv.Itoa(e.Slot)},
		{"DYNAPART_ATTEMPT", strconv.Itoa(e.Attempt)},
		{"DYNAPART_TOKEN", strconv.FormatInt(e.Token, 10)},
		{"DYNAPART_IDEMPOTENCY_KEY", e.IdempotencyKey},
		{"DYNAPART_VERSION", e.Version},
	}
}

// Environ is e as NAME=value entries, to append to a command's environment.
func (e ItemEnv) Environ() []string {
	var out []string
	for _, v := range e.vars() {
		out = append(out, v[0]+"="+v[1])
	}
	return out
}

// inExecCMD reports a process that `work --exec` runs for an item (or one it started): its
// environment has DYNAPART_IDEMPOTENCY_KEY, which is no flag's variable.
func inExecCMD(lookupEnv func(string) (string, bool)) bool {
	_, ok := lookupEnv("DYNAPART_IDEMPOTENCY_KEY")
	return ok
}

// isItemEnv reports whether name is one of ItemEnv's variables.
func isItemEnv(name string) bool {
	return slices.ContainsFunc(ItemEnv{}.vars(), func(v [2]string) bool { return v[0] == name })
}
