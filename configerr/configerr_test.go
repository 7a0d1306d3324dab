package configerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dynapart/dynapart/configerr"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// TestOneTypeBehindTheAliases: a refusal from lock or scan is caught by errors.As with a
// *configerr.Error, and the other way round, through wrapping.
func TestOneTypeBehindTheAliases(t *testing.T) {
	_, err := lock.New(nil, "t")
	var ce *configerr.Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &ce) || ce.Pkg != "lock" || ce.Field != "db" {
		t.Fatalf("lock.New(nil) gave %v, want a *configerr.Error for field db", err)
	}
	var se *scan.ConfigError
	err = scan.Plan{Mode: scan.ModeSegment}.Validate()
	if !errors.As(err, &se) || se.Pkg != "scan" {
		t.Fatalf("an invalid plan gave %v, want a *scan.ConfigError", err)
	}
	cause := errors.New("cause")
	e := &configerr.Error{Field: "Workers", Reason: "must be at least 1", Err: cause}
	if got, want := e.Error(), "dynapart: invalid Workers: must be at least 1"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, cause) {
		t.Fatal("Unwrap lost the cause")
	}
}
