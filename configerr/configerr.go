// Package configerr holds [Error], the one shape of configuration error in dynapart: an invalid
// option, argument or configuration field, named. lock.ConfigError, scan.ConfigError and
// worker.ConfigError are aliases of it, so errors.As(err, &ce) with a *configerr.Error (or any of
// the aliases) catches a refusal from any of those packages. It is a package of its own so that
// lock and scan can share it without knowing each other.
package configerr

// Error names an invalid option, argument or configuration field. Nothing has been written when a
// constructor or Run returns it.
type Error struct {
	Pkg    string // who refused it: "lock", "scan" or "dynapart" (the worker, and the default when empty)
	Field  string // the option, argument or field, e.g. "WithLeaseTTL", "n", "Workers"
	Reason string // what is wrong with it
	Err    error  // the underlying error, if any (e.g. a *lock.TableError)
}

func (e *Error) Error() string {
	pkg := e.Pkg
	if pkg == "" {
		pkg = "dynapart"
	}
	return pkg + ": invalid " + e.Field + ": " + e.Reason
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
