package work

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// effectsDoc is the --exec-effects output: one JSON object (empty output, or JSON whitespace
// alone, or {}: no effects).
//
//	{"set": {"attr": VALUE, ...}, "add": {"attr": NUMBER, ...}, "remove": ["attr", ...],
//	 "writes": [{"put":    {"table": "T", "item": {...}, "if_absent": true}},
//	            {"update": {"table": "T", "key": {...}, "set": {...}, "add": {...}, "remove": [...]}},
//	            {"delete": {"table": "T", "key": {...}}}]}
//
// Values are plain JSON and write its types only: a string is S, a number N, true/false BOOL,
// null NULL, an array L, an object M. The command's stdin gives B as base64 text and sets as
// arrays (cli.PlainJSON), so a set or binary value echoed back is stored as an L or an S.
type effectsDoc struct {
	changesDoc
	Writes []writeDoc `json:"writes"`
}

type changesDoc struct {
	Set    map[string]any `json:"set"`
	Add    map[string]any `json:"add"`
	Remove []string       `json:"remove"`
}

type writeDoc struct {
	Put    *putDoc    `json:"put"`
	Update *updateDoc `json:"update"`
	Delete *deleteDoc `json:"delete"`
}

type putDoc struct {
	Table    string         `json:"table"`
	Item     map[string]any `json:"item"`
	IfAbsent bool           `json:"if_absent"`
}

type updateDoc struct {
	Table string         `json:"table"`
	Key   map[string]any `json:"key"`
	changesDoc
}

type deleteDoc struct {
	Table string         `json:"table"`
	Key   map[string]any `json:"key"`
}

// parseEffects reads the --exec-effects output. An error says what is wrong and where.
func parseEffects(out []byte) (*worker.Effects, error) {
	if len(bytes.Trim(out, jsonSpace)) == 0 {
		return nil, nil
	}
	if err := strictEffects(out); err != nil {
		return nil, fmt.Errorf("--exec-effects: the command's output is not an effects object: %w", err)
	}
	// The walk has checked the names, the kinds and that nothing follows the object.
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var doc effectsDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("--exec-effects: the command's output is not an effects object: %w", err)
	}
	var e ledger.Effects
	item, err := doc.changes("")
	if err != nil {
		return nil, err
	}
	e.Item(item...)
	for i, w := range doc.Writes {
		wr, err := w.write(fmt.Sprintf("writes[%d]", i))
		if err != nil {
			return nil, err
		}
		e.AddWrite(wr)
	}
	return &e, nil
}

// changes are d's set, add and remove; where names the object in errors.
func (d changesDoc) changes(where string) ([]ledger.Change, error) {
	var cs []ledger.Change
	for _, part := range []struct {
		name string
		m    map[string]any
		f    func(string, any) ledger.Change
	}{{"set", d.Set, func(n string, v any) ledger.Change { return ledger.Set(n, v) }},
		{"add", d.Add, func(n string, v any) ledger.Change { return ledger.Add(n, v) }}} {
		for name, v := range part.m {
			av, err := cli.FromPlain(v)
			if err != nil {
				return nil, fmt.Errorf("--exec-effects: %s%s.%s: %w", where, part.name, name, err)
			}
			if _, isNum := av.(*types.AttributeValueMemberN); part.name == "add" && !isNum {
				return nil, fmt.Errorf("--exec-effects: %s%s.%s: want a number", where, part.name, name)
			}
			cs = append(cs, part.f(name, av))
		}
	}
	for _, name := range d.Remove {
		cs = append(cs, ledger.Remove(name))
	}
	return cs, nil
}

// write is w as a ledger.Write; where names it in errors.
func (w writeDoc) write(where string) (ledger.Write, error) {
	n := 0
	for _, set := range []bool{w.Put != nil, w.Update != nil, w.Delete != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return ledger.Write{}, fmt.Errorf("--exec-effects: %s: want exactly one of put, update, delete", where)
	}
	switch {
	case w.Put != nil:
		item, err := plainItem(w.Put.Item, where+".put.item")
		switch {
		case err != nil:
		case w.Put.Table == "":
			err = fmt.Errorf("--exec-effects: %s.put: no table", where)
		case !cli.IsTableName(w.Put.Table):
			err = notATable(w.Put.Table, where+".put")
		case len(item) == 0:
			err = fmt.Errorf("--exec-effects: %s.put: no item", where)
		}
		return ledger.Write{Kind: ledger.WritePut, Table: w.Put.Table, Item: item, IfAbsent: w.Put.IfAbsent}, err
	case w.Update != nil:
		key, err := tableKey(w.Update.Table, w.Update.Key, where+".update")
		if err != nil {
			return ledger.Write{}, err
		}
		cs, err := w.Update.changes(where + ".update.")
		if err == nil && len(cs) == 0 {
			err = fmt.Errorf("--exec-effects: %s.update: no change (set, add or remove)", where)
		}
		return ledger.Write{Kind: ledger.WriteUpdate, Table: w.Update.Table, Key: key, Changes: cs}, err
	}
	key, err := tableKey(w.Delete.Table, w.Delete.Key, where+".delete")
	return ledger.Write{Kind: ledger.WriteDelete, Table: w.Delete.Table, Key: key}, err
}

func tableKey(table string, key map[string]any, where string) (ledger.Key, error) {
	if table == "" {
		return nil, fmt.Errorf("--exec-effects: %s: no table", where)
	}
	if !cli.IsTableName(table) {
		return nil, notATable(table, where)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("--exec-effects: %s: no key", where)
	}
	return plainItem(key, where+".key")
}

// notATable refuses the table of the write at where before anything is sent: DynamoDB refuses the
// commit as a whole, without saying which write names it.
func notATable(table, where string) error {
	return fmt.Errorf("--exec-effects: %s.table %q: %s", where, table, cli.NotATableName)
}

func plainItem(m map[string]any, where string) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		av, err := cli.FromPlain(v)
		if err != nil {
			return nil, fmt.Errorf("--exec-effects: %s.%s: %w", where, k, err)
		}
		out[k] = av
	}
	return out, nil
}
