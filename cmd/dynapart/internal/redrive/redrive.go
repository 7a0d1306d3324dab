// Package redrive is `dynapart redrive`: dead letters back to pending.
package redrive

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/internal/capacity"
	"github.com/dynapart/dynapart/internal/ddbnum"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// New is `dynapart redrive`.
func New(g *cli.Globals) *cobra.Command {
	var lf cli.LedgerFlags
	var keys []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move dead-lettered items back to pending",
		Long: `Moves dead-lettered (failed) items back to pending, so that the next pass of a worker claims
them again as a first attempt (a worker of a group that is not finished: a finished --once group
does not pass again, so run 'dynapart work' with a new --group): the attempt count is reset, and the last error is kept for history in
<attr-prefix>last_error (inline ledger; last_error on a ledger table row) with the time of the
redrive in <attr-prefix>redriven_at. Each move is one conditional write, made only while the item
is still failed.

Without --key every dead letter of the ledger is moved. --key (repeatable) names items: a JSON
object as 'dynapart failed' prints it ({"id":"user-1"}, numbers as JSON numbers, binary values in
base64), or, for a table with only a partition key, the bare value (user-1, 42). A key that is not
failed (pending, claimed, done, or no such item) is a no-op, counted as "not failed"; a malformed
key (a number DynamoDB cannot store, or a value longer than a key can be: 2048 bytes for a partition
key, 1024 for a sort key) exits 2 before anything is written.

A move DynamoDB refuses or cannot take (after the SDK's retries), or Ctrl-C (SIGINT, SIGTERM),
stops the redrive with exit 1: the moves before it stand and are printed, and the error names the
item it stopped at (whose own move may have landed if only DynamoDB's answer was lost, uncounted).
Running the same redrive again is safe: it moves what is failed then (without --key, also items
that failed since). To leave out an item whose move DynamoDB refuses (it stops there each time),
name the others with --key.

In index mode, a redriven item is not back in the pending index; a filter or segment pass picks it up.

` + cli.LedgerUsedHelp("it moved nothing"),
		Example: `  dynapart redrive --table users
  dynapart redrive --table users --key user-17 --key user-42
  dynapart redrive --table users --ledger table --job campaign-42 --key '{"id":"user-17"}' --json`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			l, err := lf.Open(ctx, g)
			if err != nil {
				return stopped(ctx, err)
			}
			parsed, err := parseKeys(ctx, g, lf.Table, keys)
			if err != nil {
				return stopped(ctx, err)
			}
			res, err := worker.Redrive(ctx, l, parsed, time.Now())
			if res.Moved > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "dynapart: the items moved are pending again; a worker of a group that is not finished claims them (a finished --once group does not pass again: run work with a new --group)")
			}
			if err == nil && res.Moved == 0 {
				err = lf.Unused(ctx, g, l, nil)
			}
			return report(cmd.OutOrStdout(), res, stopped(ctx, err), asJSON)
		},
	}
	lf.Add(cmd.Flags())
	lf.AddLeaseTable(cmd.Flags())
	cmd.Flags().StringArrayVar(&keys, "key", nil, `item to redrive (repeatable): {"id":"user-1"}, or the bare value for a partition-key-only table (default: every dead letter)`)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"moved":..,"not_failed":..}`)
	return cmd
}

// report prints what a redrive did, also when it stopped, and returns err (or the print's).
func report(w io.Writer, res worker.RedriveResult, err error, asJSON bool) error {
	if !asJSON {
		fmt.Fprintf(w, "moved %d  not failed %d\n", res.Moved, res.NotFailed)
		return err
	}
	if jerr := json.NewEncoder(w).Encode(res); jerr != nil && err == nil {
		return jerr
	}
	return err
}

// stopped says where a redrive that stopped at a key whose move failed stopped, the key spelled as
// --key takes it (or, when plain JSON cannot spell it, as ledger.KeyText does); a redrive
// interrupted before its first move says so; other errors are returned as they are.
func stopped(ctx context.Context, err error) error {
	var re *worker.RedriveError
	if !errors.As(err, &re) {
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("redrive interrupted before its first move: %w", err)
		}
		return err
	}
	key, jerr := cli.PlainJSON(re.Key)
	if jerr != nil {
		key = []byte(ledger.KeyText(re.Key))
	}
	return &stopError{text: re.Describe(string(key)), err: err}
}

// stopError is a RedriveError in the CLI's words.
type stopError struct {
	text string
	err  error
}

func (e *stopError) Error() string { return e.text }
func (e *stopError) Unwrap() error { return e.err }

// parseKeys turns --key values into item keys typed by the key schema of the source table.
func parseKeys(ctx context.Context, g *cli.Globals, table string, raw []string) ([]worker.Key, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	_, t, err := g.DescribeSource(ctx, table)
	if err != nil {
		return nil, err
	}
	schema := cli.TableSchema(t).Specs()
	out := make([]worker.Key, 0, len(raw))
	for _, r := range raw {
		k, err := parseItemKey(r, schema)
		if err != nil {
			return nil, cli.Usagef("--key %q: %v", r, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// parseItemKey reads a key given as a JSON object, or as a bare value for a one-attribute key.
func parseItemKey(s string, schema []cli.KeySpec) (worker.Key, error) {
	vals := map[string]any{}
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var err error
		if vals, err = keyObject(s); err != nil {
			return nil, err
		}
	} else {
		if len(schema) != 1 {
			return nil, fmt.Errorf("the table has a sort key: give the key as a JSON object with %s", keyNames(schema))
		}
		vals[schema[0].Name] = s
	}
	if len(vals) != len(schema) {
		return nil, fmt.Errorf("want exactly the key attributes %s", keyNames(schema))
	}
	key := worker.Key{}
	for i, ks := range schema {
		v, ok := vals[ks.Name]
		if !ok {
			return nil, fmt.Errorf("lacks key attribute %q (want %s)", ks.Name, keyNames(schema))
		}
		av, err := keyValue(v, ks.Type)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %v", ks.Name, err)
		}
		if n, most := capacity.ValueSize(av), keyLimits[min(i, 1)]; n > most {
			return nil, fmt.Errorf("attribute %q: %d bytes, where DynamoDB keeps at most %d in a %s key: no item has this key", ks.Name, n, most, keyRoles[min(i, 1)])
		}
		key[ks.Name] = av
	}
	return key, nil
}

// keyLimits are DynamoDB's largest partition and sort key values, in bytes; keyRoles name them.
var (
	keyLimits = [2]int{2048, 1024}
	keyRoles  = [2]string{"partition", "sort"}
)

// keyObject reads one JSON object and nothing after it, numbers kept as written; an attribute
// named twice is an error (json.Unmarshal would keep the last silently).
func keyObject(s string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	bad := func(err error) (map[string]any, error) { return nil, fmt.Errorf("not a JSON object: %v", err) }
	if _, err := dec.Token(); err != nil { // the {, as the caller saw
		return bad(err)
	}
	vals := map[string]any{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		name, _ := t.(string)
		if _, twice := vals[name]; twice {
			return nil, fmt.Errorf("attribute %q given twice", name)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		vals[name] = v
	}
	if _, err := dec.Token(); err != nil { // }
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not one JSON object: more after it")
	}
	return vals, nil
}

func keyValue(v any, typ types.ScalarAttributeType) (types.AttributeValue, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return nil, fmt.Errorf("want a string or a number, got %T", v)
	}
	switch typ {
	case types.ScalarAttributeTypeS:
		if s == "" {
			return nil, fmt.Errorf("empty string")
		}
		return &types.AttributeValueMemberS{Value: s}, nil
	case types.ScalarAttributeTypeN:
		return numberKey(s)
	case types.ScalarAttributeTypeB:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%q is not non-empty base64", s)
		}
		return &types.AttributeValueMemberB{Value: b}, nil
	}
	return nil, fmt.Errorf("unknown key type %q", typ)
}

// numberKey is a number key value as DynamoDB stores it, written in its canonical form (so that
// errors can show it as a JSON number); text DynamoDB would refuse is an error that says why.
func numberKey(s string) (types.AttributeValue, error) {
	if err := ddbnum.Check(s); err != nil {
		return nil, fmt.Errorf("number %q: %v", ddbnum.Short(s), err)
	}
	c, err := ddbnum.Canonical(s)
	if err != nil {
		return nil, fmt.Errorf("number %q: %v", ddbnum.Short(s), err)
	}
	return &types.AttributeValueMemberN{Value: c}, nil
}

func keyNames(schema []cli.KeySpec) string {
	names := make([]string, len(schema))
	for i, k := range schema {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}
