package work

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// encoding/json matches an object's names to fields without regard to case and keeps the last of
// a name given twice. The --exec-effects contract names its fields exactly, and an object with a
// name twice is ambiguous, so strictEffects walks the output once before it is decoded: it refuses
// a name given twice in any object (an item's attributes included), a field of the contract
// spelled otherwise than the contract spells it or holding another kind of value (null included),
// an empty attribute name (an item's, a key's, or a map's in a value: DynamoDB's refusal names only
// a placeholder), nesting deeper than DynamoDB stores, any output that is not one JSON object, and text that is
// not UTF-8 or a string that is not characters (effects_text.go). An error says where: the path in
// the object and the line and column in the output.

// effectsFields are the field names of the contract's objects, by their path ("[]" for an element
// of an array).
var effectsFields = map[string][]string{
	"":                {"set", "add", "remove", "writes"},
	"writes[]":        {"put", "update", "delete"},
	"writes[].put":    {"table", "item", "if_absent"},
	"writes[].update": {"table", "key", "set", "add", "remove"},
	"writes[].delete": {"table", "key"},
}

// effectsKinds are the kinds of value the contract's fields take, by path (null is none of them:
// jq's {set: .missing} must not pass for "no effects").
var effectsKinds = map[string]string{
	"set": anObject, "add": anObject, "remove": anArray, "writes": anArray,
	"writes[]": anObject, "writes[].put": anObject, "writes[].update": anObject, "writes[].delete": anObject,
	"writes[].put.table": aString, "writes[].put.item": anObject, "writes[].put.if_absent": aBoolean,
	"writes[].update.table": aString, "writes[].update.key": anObject, "writes[].update.set": anObject,
	"writes[].update.add": anObject, "writes[].update.remove": anArray,
	"remove[]": aString, "writes[].update.remove[]": aString,
	"writes[].delete.table": aString, "writes[].delete.key": anObject,
}

const (
	anObject = "an object"
	anArray  = "an array"
	aString  = "a string"
	aBoolean = "a boolean"
)

// maxEffectsDepth bounds how deep the output nests: the contract's own 5 levels and a value's.
const maxEffectsDepth = 40

// maxValueDepth is how many levels of lists and maps DynamoDB stores in an attribute's value
// (DynamoDB Local: 31 lists around a string are stored, 32 refused as "Nesting Levels have
// exceeded supported limit").
const maxValueDepth = 31

// userShape is the shape of what the user names: an item, a key, a value.
const userShape = "*"

// effectsWalk is one walk of an --exec-effects output.
type effectsWalk struct {
	out   []byte
	dec   *json.Decoder
	depth int // of the value being read
	// attrDepth is the depth of the object whose fields are attributes (set, add, an item, a key)
	// while one of their values is read; 0 outside them.
	attrDepth int
}

// strictEffects checks out (not empty) as described above.
func strictEffects(out []byte) error {
	w := &effectsWalk{out: out, dec: json.NewDecoder(bytes.NewReader(out))}
	w.dec.UseNumber() // any number is a number here (1e400 too): cli.FromPlain judges its range
	if err := w.notUTF8(); err != nil {
		return err
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntax(err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("the output is %s, not a JSON object", describeToken(tok))
	}
	if err := w.object("", ""); err != nil {
		return err
	}
	end := w.dec.InputOffset()
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("more than one JSON value: text after the object at %s", w.at(w.next(end)))
	}
	return nil
}

// object reads the rest of an object whose opening brace was read: shape is its path in the
// contract (with "[]" for array elements), where the path shown in errors.
func (w *effectsWalk) object(shape, where string) error {
	fields, checked := effectsFields[shape]
	seen := map[string]bool{}
	for w.dec.More() {
		start := w.dec.InputOffset()
		tok, err := w.dec.Token()
		if err != nil {
			return w.syntax(err)
		}
		name := tok.(string)
		if err := w.loneSurrogate(start, orTop(where)); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("%s: %q is given twice (at %s)", orTop(where), name, w.at(w.next(start)))
		}
		seen[name] = true
		if !checked && name == "" {
			return fmt.Errorf("%s: an empty attribute name (\"\") at %s: DynamoDB refuses one, in a map as in an item", orTop(where), w.at(w.next(start)))
		}
		if checked && !slices.Contains(fields, name) {
			return fmt.Errorf("%s: unknown field %q at %s (want one of %s)", orTop(where), name, w.at(w.next(start)), strings.Join(fields, ", "))
		}
		child := userShape
		if checked {
			child = join(shape, name)
		}
		attrs := !checked && w.attrDepth == 0 // name is an attribute's, the value its value
		if attrs {
			w.attrDepth = w.depth
		}
		err = w.value(child, join(where, name))
		if attrs {
			w.attrDepth = 0
		}
		if err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // the closing brace
	return w.syntax(err)
}

// value reads one value at shape (see object; userShape below the contract's objects).
func (w *effectsWalk) value(shape, where string) error {
	start := w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntax(err)
	}
	if want, ok := effectsKinds[shape]; ok && describeToken(tok) != want {
		return fmt.Errorf("%s: want %s, got %s at %s", where, want, describeToken(tok), w.at(w.next(start)))
	}
	if _, ok := tok.(string); ok {
		return w.loneSurrogate(start, where)
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		if w.depth++; w.depth > maxEffectsDepth {
			return fmt.Errorf("%s: nested deeper than %d levels at %s (DynamoDB stores %d in a value)", where, maxEffectsDepth, w.at(w.dec.InputOffset()), maxValueDepth)
		}
		if w.attrDepth > 0 && w.depth-w.attrDepth > maxValueDepth {
			return fmt.Errorf("%s: a value nested deeper than DynamoDB stores (%d levels of lists and maps) at %s", where, maxValueDepth, w.at(w.dec.InputOffset()))
		}
		defer func() { w.depth-- }()
	}
	switch tok {
	case json.Delim('{'):
		if _, ok := effectsFields[shape]; !ok {
			shape = userShape // an item's, a key's or a value's object: names are the user's
		}
		return w.object(shape, where)
	case json.Delim('['):
		for i := 0; w.dec.More(); i++ {
			elem := userShape
			if _, ok := effectsKinds[shape+"[]"]; ok {
				elem = shape + "[]"
			}
			if err := w.value(elem, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		_, err := w.dec.Token()
		return w.syntax(err)
	}
	return nil
}

func describeToken(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if tok == json.Delim('{') {
			return anObject
		}
		return anArray
	case string:
		return aString
	case bool:
		return aBoolean
	}
	return "a number"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orTop(where string) string {
	if where == "" {
		return "the object"
	}
	return where
}
