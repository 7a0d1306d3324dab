package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/lock"
)

// tableFlags are the flags that name a DynamoDB table, in every command that has them.
var tableFlags = []string{"table", "lease-table", "ledger-table"}

// tableName is what DynamoDB takes as a table's name: 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.'.
var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// CheckTableNames refuses, as bad usage, a table flag whose value DynamoDB would refuse as a table
// name (a table ARN passes): before anything is sent, naming the flag, where DynamoDB's refusal
// came later, as a runtime failure. An empty value is left to the command (required, or unused).
func CheckTableNames(fs *pflag.FlagSet) error {
	for _, name := range tableFlags {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		if v := f.Value.String(); !IsTableName(v) {
			return Usagef("--%s %q: %s", name, v, NotATableName)
		}
	}
	return nil
}

// NotATableName says why a name IsTableName refuses is refused.
const NotATableName = "not a DynamoDB table name (3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'; or a table ARN)"

// IsTableName reports whether DynamoDB takes v as a table's name, or v is a DynamoDB ARN (a table's).
func IsTableName(v string) bool {
	if a, err := arn.Parse(v); err == nil && a.Service == "dynamodb" {
		return true
	}
	return tableName.MatchString(v)
}

// TableFlagOf is err, a *lock.TableError of cmd, with the flag that named its table in front
// ("--lease-table: lock: table ...: table does not exist"), when its message does not name one:
// status, pause, resume and scale met the lease table's error without saying which setting it is
// (FromEnv then names the variable that set it). Other errors are returned as they are.
func TableFlagOf(cmd *cobra.Command, err error) error {
	var te *lock.TableError
	if cmd == nil || !errors.As(err, &te) || strings.Contains(err.Error(), "--") {
		return err
	}
	for _, name := range tableFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Value.String() == te.Table {
			return &UsageError{fmt.Errorf("--%s: %w", name, err)}
		}
	}
	return err
}
