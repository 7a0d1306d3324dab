package work

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestParseEffects: the --exec-effects output becomes the item's changes and the writes; output
// that is not such an object is refused with an error that says where.
func TestParseEffects(t *testing.T) {
	e, err := parseEffects([]byte(`{"set": {"first": "Ada", "tags": ["a", 1, null], "meta": {"ok": true}}, "add": {"n": 2},
		"remove": ["name"], "writes": [
		{"put": {"table": "items", "item": {"pk": "x", "v": 1.5}, "if_absent": true}},
		{"update": {"table": "counters", "key": {"pk": "total"}, "add": {"n": 1}}},
		{"delete": {"table": "items", "key": {"pk": "old"}}}]}`))
	require.NoError(t, err)
	require.Len(t, e.ItemChanges(), 5)
	ws := e.Writes()
	require.Len(t, ws, 3)
	require.Equal(t, ledger.WritePut, ws[0].Kind)
	require.True(t, ws[0].IfAbsent)
	require.Equal(t, &types.AttributeValueMemberN{Value: "1.5"}, ws[0].Item["v"])
	require.Equal(t, ledger.WriteUpdate, ws[1].Kind)
	require.Equal(t, ledger.WriteDelete, ws[2].Kind)

	deepest := `{"set": {"a": ` + strings.Repeat("[", 31) + `"x"` + strings.Repeat("]", 31) + `}, "writes": [{"put": {"table": "items", "item": {"pk": "x", "m": ` +
		strings.Repeat(`{"k":`, 31) + "1" + strings.Repeat("}", 31) + `}}}]}`
	_, err = parseEffects([]byte(deepest))
	require.NoError(t, err, "31 levels in a value, as DynamoDB stores")

	for _, empty := range []string{"", " \n", "{}"} {
		e, err := parseEffects([]byte(empty))
		require.NoError(t, err, "%q", empty)
		require.True(t, e.Empty(), "%q", empty)
	}
	for out, where := range map[string]string{
		`not json`:              "not an effects object",
		`{"sett": {}}`:          "unknown field",
		`{} {}`:                 "more than one JSON value",
		`{"add": {"n": "one"}}`: "add.n: want a number",
		`{"writes": [{}]}`:      "writes[0]: want exactly one of put, update, delete",
		`{"writes": [{"put": {"item": {"pk": "x"}}}]}`:   "writes[0].put: no table",
		`{"writes": [{"update": {"table": "items"}}]}`:   "writes[0].update: no key",
		`{"writes": [{"delete": {"key": {"pk": "x"}}}]}`: "writes[0].delete: no table",
		// A table name DynamoDB refuses: its refusal of the commit does not say which write.
		`{"writes": [{"put": {"table": "items", "item": {"pk": "x"}}}, {"put": {"table": "a b", "item": {"pk": "x"}}}]}`: `writes[1].put.table "a b": not a DynamoDB table name`,
		`{"writes": [{"update": {"table": "ab", "key": {"pk": "x"}, "set": {"v": 1}}}]}`:                                 `writes[0].update.table "ab": not a DynamoDB table name`,
		`{"writes": [{"delete": {"table": "t/x", "key": {"pk": "x"}}}]}`:                                                 `writes[0].delete.table "t/x": not a DynamoDB table name`,
		// Not an object: refused, not taken for "no effects" (jq prints null for a missing field).
		`null`: "the output is null, not a JSON object",
		`[]`:   "the output is an array",
		// Names as the contract spells them, each once (encoding/json alone takes both).
		`{"SET": {"a": 1}}`: `unknown field "SET" at line 1, column 2`,
		`{"writes": [{"put": {"Table": "T", "item": {}}}]}`: `writes[0].put: unknown field "Table"`,
		`{"set": {"a": 1}, "set": {"b": 2}}`:                `"set" is given twice (at line 1, column 19)`,
		`{"set": {"a": 1, "a": 2}}`:                         `set: "a" is given twice`,
		"{\"set\": {\"a\": 1},\n \"add\": {\"n\": 1,}}":     "looking for beginning of object key string at line 2, column 17",
		`{"set": {"a": "x"`:                                 "the output ends inside a JSON value",
		`{"set": {}} x`:                                     "text after the object at line 1, column 13",
		`{}{}`:                                              "text after the object at line 1, column 3",
		`{} 1`:                                              "text after the object at line 1, column 4",
		`{}"s"`:                                             "text after the object at line 1, column 3",
		`{"writes": [{"update": {"table": "items", "key": {"pk": "x"}}}]}`: "writes[0].update: no change (set, add or remove)",
		`{"writes": [{"put": {"table": "items", "item": null}}]}`:          "writes[0].put.item: want an object, got null",
		`{"writes": [{"put": {"table": "items", "item": {}}}]}`:            "writes[0].put: no item",
		`{"set": null}`:             "set: want an object, got null at line 1, column 9",
		`{"remove": ["a", null]}`:   "remove[1]: want a string, got null at line 1, column 18",
		`{"writes": {"put": {}}}`:   "writes: want an array, got an object",
		`{"set": {"é": 1, "é": 2}}`: `set: "é" is given twice (at line 1, column 18)`,
		// Numbers DynamoDB cannot store, named here: its own refusal names a placeholder (":1").
		`{"set": {"ok": 1, "price": 1e400}}`: "set.price: number 1e400: out of DynamoDB's range",
		`{"writes": [{"put": {"table": "items", "item": {"pk": "x", "n": 1234567890123456789012345678901234567890}}}]}`: "item.n: number 1234567890123456789012345678901234567890: 39 significant digits",
		`{"set": {"a": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`:                                   "a value nested deeper than DynamoDB stores",
		// An empty attribute name, at the top or in a map: DynamoDB's refusal names a placeholder (":0").
		`{"set": {"m": {"a": {"": 1}}}}`: `set.m.a: an empty attribute name ("") at line 1, column 22`,
		`{"set": {"": 1}}`:               `set: an empty attribute name ("")`,
		`{"writes": [{"update": {"table": "items", "key": {"": "x"}, "set": {"a": 1}}}]}`: `writes[0].update.key: an empty attribute name ("")`,
		// DynamoDB stores 31 levels of lists and maps in a value: the 32nd is refused here, with its path.
		`{"set": {"a": ` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}}`:                                                                "set.a" + strings.Repeat("[0]", 31) + ": a value nested deeper than DynamoDB stores (31 levels",
		`{"writes": [{"put": {"table": "items", "item": {"pk": "x", "m": ` + strings.Repeat(`{"k":`, 32) + "1" + strings.Repeat("}", 32) + `}}}]}`: "a value nested deeper than DynamoDB stores",
	} {
		_, err := parseEffects([]byte(out))
		require.Error(t, err, out)
		require.True(t, strings.Contains(err.Error(), where), "%q: %v", out, err)
	}
}

// TestParseEffectsText: output that is not UTF-8, or a string (value or name) with an escape of
// half a UTF-16 surrogate pair, is refused saying where; encoding/json alone would turn either
// into U+FFFD and the altered text would be committed. A pair, and an escaped U+FFFD, are text.
func TestParseEffectsText(t *testing.T) {
	for out, want := range map[string]string{
		"{\"set\": {\"name\": \"caf\xe9\"}}":                              "the output is not UTF-8: byte 0xE9 at line 1, column 22",
		"{\"set\": {\"k\xff\": \"v\"}}":                                   "the output is not UTF-8: byte 0xFF at line 1, column 12",
		"{\"set\": {\"a\": 1},\n\"x\xc3\"}":                               "byte 0xC3 at line 2, column 3",
		`{"set": {"name": "a\ud800b"}}`:                                   `set.name: \ud800 at line 1, column 20 is half of a UTF-16 surrogate pair`,
		`{"set": {"a\udc00": 1}}`:                                         `set: \udc00 at line 1, column 12 is half`,
		`{"set": {"a": "\uDBFF\u0041"}}`:                                  `set.a: \uDBFF at line 1, column 16`,
		`{"set": {"a": "\udc00\ud800"}}`:                                  `set.a: \udc00 at`,
		`{"set": {"a": "\ud800"}}`:                                        `set.a: \ud800 at`,
		`{"writes": [{"delete": {"table": "T\ud800", "key": {"k": 1}}}]}`: `writes[0].delete.table: \ud800`,
	} {
		_, err := parseEffects([]byte(out))
		require.Error(t, err, "%q", out)
		require.Contains(t, err.Error(), want, "%q", out)
	}
	e, err := parseEffects([]byte(`{"set": {"smile": "\ud83d\ude00", "\\ud800": "\ufffd", "q": "\\"}}`))
	require.NoError(t, err)
	require.ElementsMatch(t, []ledger.Change{ledger.Set("smile", &types.AttributeValueMemberS{Value: "😀"}),
		ledger.Set(`\ud800`, &types.AttributeValueMemberS{Value: "\uFFFD"}), ledger.Set("q", &types.AttributeValueMemberS{Value: `\`})}, e.ItemChanges())
}

// TestParseEffectsWhitespace: only JSON's whitespace (space, tab, CR, LF) around nothing is "no
// effects"; a form feed, a vertical tab, U+00A0 or U+0085 is not JSON, alone or after the object.
func TestParseEffectsWhitespace(t *testing.T) {
	e, err := parseEffects([]byte(" \t\r\n"))
	require.NoError(t, err)
	require.True(t, e.Empty())
	for _, out := range []string{"\f", "\v", "\u00a0", "\u0085", "\f{}", "{}\f", "{}\u00a0"} {
		_, err := parseEffects([]byte(out))
		require.Error(t, err, "%q is not JSON whitespace", out)
	}
}

// TestParseEffectsSyntaxAt: a syntax error is placed at its character (the decoder's own offset
// counts only some bytes, and past the bad one), and a character outside strings that is not
// ASCII is named as it is, a byte order mark as such.
func TestParseEffectsSyntaxAt(t *testing.T) {
	for out, want := range map[string]string{
		"x":                        "invalid character 'x' looking for beginning of value at line 1, column 1",
		"\f":                       `invalid character '\f' looking for beginning of value at line 1, column 1`,
		`{"set": {"a": tru}}`:      "invalid character '}' in literal true (expecting 'e') at line 1, column 18",
		"{\"set\":\n  {\"a\": x}}": "invalid character 'x' looking for beginning of value at line 2, column 9",
		`{"set": {"a": 1.}}`:       "after decimal point in numeric literal at line 1, column 17",
		`{"set": {"é": "\q"}}`:     "invalid character 'q' in string escape code at line 1, column 17",
		`{"set" {}}`:               "invalid character '{' after object key at line 1, column 8",
		"\xef\xbb\xbf{}":           "a UTF-8 byte order mark (U+FEFF) at line 1, column 1",
		"\n\xef\xbb\xbf{}":         "a UTF-8 byte order mark (U+FEFF) at line 2, column 1",
		"\u00a0":                   `invalid character U+00A0 '\u00a0' at line 1, column 1`,
		"{\"set\": {\"a\": é}}":    `invalid character U+00E9 'é' at line 1, column 15`,
	} {
		_, err := parseEffects([]byte(out))
		require.Error(t, err, "%q", out)
		require.Contains(t, err.Error(), want, "%q", out)
	}
}
