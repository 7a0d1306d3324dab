package scan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cursor is how far one segment (in index mode: one shard) has been read and acknowledged.
// LastEvaluatedKey is the key after which the next unacknowledged page starts; nil with Done false
// means the segment starts from its beginning. Done is explicit: a nil key never means done.
type Cursor struct {
	TotalSegments    int
	Segment          int
	LastEvaluatedKey map[string]types.AttributeValue
	Done             bool
}

// Position is a slot's whole scan position, the value a checkpoint encodes. Table, Index, Mode
// and TotalSegments (Config.Shards in index mode) let a scanner refuse a position made for a
// different scan with ErrCheckpointMismatch instead of skipping items.
type Position struct {
	Table         string
	Index         string // index mode only
	Mode          Mode   // "" in positions made by hand: not checked
	TotalSegments int
	Cursors       []Cursor
}

// Cursor returns p's cursor for segment seg (shard, in index mode), and whether p has one. A
// segment without a cursor starts from its beginning when p is resumed.
//
// A position may hold cursors for any subset of the segments a slot owns, taken from checkpoints
// of other slots or other plans with the same TotalSegments (segment mode keeps its segments when
// Slots changes, see Plan.Segments): for each segment, the cursor of the latest checkpoint that
// has it. Such a position, with Table, Mode and TotalSegments set, encodes with EncodeCheckpoint
// and resumes like one the slot made itself; a cursor for a segment the slot does not own under
// its plan is refused with ErrCheckpointMismatch.
func (p Position) Cursor(seg int) (Cursor, bool) {
	for _, c := range p.Cursors {
		if c.Segment == seg {
			return c, true
		}
	}
	return Cursor{}, false
}

const checkpointVersion = 1

// The wire form is compact JSON with keys in DynamoDB JSON, e.g.
//
//	{"v":1,"t":"users","m":"segment","n":8,"c":[{"s":0,"k":{"id":{"S":"u17"}}},{"s":1,"d":true},{"s":2}]}
//
// Plain JSON rather than base64: it is already printable and a person reading `dynapart status`
// can see how far each segment got.
type wirePosition struct {
	V int          `json:"v"`
	T string       `json:"t"`
	I string       `json:"i,omitempty"`
	M Mode         `json:"m,omitempty"`
	N int          `json:"n"`
	C []wireCursor `json:"c"`
}

type wireCursor struct {
	S int                 `json:"s"`
	K map[string]wireAttr `json:"k,omitempty"`
	D bool                `json:"d,omitempty"`
}

// wireAttr is one DynamoDB JSON scalar; keys are only ever S, N or B.
type wireAttr struct {
	S *string `json:"S,omitempty"`
	N *string `json:"N,omitempty"`
	B *string `json:"B,omitempty"` // standard base64, as in DynamoDB JSON
}

// EncodeCheckpoint encodes p compactly (see Scanner.Checkpoint). A cursor whose TotalSegments
// differs from p's is an error wrapping ErrCheckpointMismatch; a key attribute that is not S, N
// or B an error wrapping ErrBadCheckpoint.
func EncodeCheckpoint(p Position) (string, error) {
	w := wirePosition{V: checkpointVersion, T: p.Table, I: p.Index, M: p.Mode, N: p.TotalSegments, C: make([]wireCursor, len(p.Cursors))}
	for i, c := range p.Cursors {
		if c.TotalSegments != 0 && c.TotalSegments != p.TotalSegments {
			return "", fmt.Errorf("%w: cursor of segment %d has TotalSegments %d, the position %d", ErrCheckpointMismatch, c.Segment, c.TotalSegments, p.TotalSegments)
		}
		w.C[i] = wireCursor{S: c.Segment, D: c.Done}
		if c.Done {
			continue
		}
		if len(c.LastEvaluatedKey) > 0 {
			w.C[i].K = make(map[string]wireAttr, len(c.LastEvaluatedKey))
		}
		for name, v := range c.LastEvaluatedKey {
			var a wireAttr
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				a.S = &v.Value
			case *types.AttributeValueMemberN:
				a.N = &v.Value
			case *types.AttributeValueMemberB:
				b := base64.StdEncoding.EncodeToString(v.Value)
				a.B = &b
			default:
				return "", fmt.Errorf("%w: key attribute %q of segment %d has type %T (want S, N or B)", ErrBadCheckpoint, name, c.Segment, v)
			}
			w.C[i].K[name] = a
		}
	}
	if err := w.check(); err != nil {
		return "", err
	}
	out, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	return string(out), nil
}

// DecodeCheckpoint decodes a checkpoint made by EncodeCheckpoint. Anything else, including a
// truncated or hand-edited value, is an error wrapping ErrBadCheckpoint; it never panics.
func DecodeCheckpoint(s string) (Position, error) {
	var w wirePosition
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Position{}, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if dec.More() {
		return Position{}, fmt.Errorf("%w: trailing data", ErrBadCheckpoint)
	}
	if err := w.check(); err != nil {
		return Position{}, err
	}
	p := Position{Table: w.T, Index: w.I, Mode: w.M, TotalSegments: w.N, Cursors: make([]Cursor, len(w.C))}
	for i, c := range w.C {
		p.Cursors[i] = Cursor{TotalSegments: w.N, Segment: c.S, Done: c.D}
		if len(c.K) == 0 {
			continue
		}
		key := make(map[string]types.AttributeValue, len(c.K))
		for name, a := range c.K {
			switch {
			case a.S != nil && a.N == nil && a.B == nil:
				key[name] = &types.AttributeValueMemberS{Value: *a.S}
			case a.N != nil && a.S == nil && a.B == nil:
				if _, ok := ParseNumber(*a.N); !ok {
					return Position{}, fmt.Errorf("%w: key attribute %q of segment %d is not a number", ErrBadCheckpoint, name, c.S)
				}
				key[name] = &types.AttributeValueMemberN{Value: *a.N}
			case a.B != nil && a.S == nil && a.N == nil:
				b, err := base64.StdEncoding.DecodeString(*a.B)
				if err != nil {
					return Position{}, fmt.Errorf("%w: key attribute %q of segment %d: %v", ErrBadCheckpoint, name, c.S, err)
				}
				key[name] = &types.AttributeValueMemberB{Value: b}
			default:
				return Position{}, fmt.Errorf("%w: key attribute %q of segment %d must have exactly one of S, N, B", ErrBadCheckpoint, name, c.S)
			}
		}
		p.Cursors[i].LastEvaluatedKey = key
	}
	return p, nil
}

func (w *wirePosition) check() error {
	switch {
	case w.V != checkpointVersion:
		return fmt.Errorf("%w: version %d, want %d", ErrBadCheckpoint, w.V, checkpointVersion)
	case w.T == "":
		return fmt.Errorf("%w: no table", ErrBadCheckpoint)
	case w.N < 1 || w.N > maxTotalSegments:
		return fmt.Errorf("%w: TotalSegments %d out of range", ErrBadCheckpoint, w.N)
	case w.M != "" && w.M != ModeSegment && w.M != ModeFilter && w.M != ModeIndex:
		return fmt.Errorf("%w: unknown mode %q", ErrBadCheckpoint, w.M)
	case len(w.C) > w.N:
		return fmt.Errorf("%w: %d cursors for %d segments", ErrBadCheckpoint, len(w.C), w.N)
	}
	seen := make(map[int]bool, len(w.C))
	for _, c := range w.C {
		switch {
		case c.S < 0 || c.S >= w.N:
			return fmt.Errorf("%w: segment %d out of range [0, %d)", ErrBadCheckpoint, c.S, w.N)
		case seen[c.S]:
			return fmt.Errorf("%w: segment %d twice", ErrBadCheckpoint, c.S)
		case c.D && len(c.K) > 0:
			return fmt.Errorf("%w: segment %d is done but has a key", ErrBadCheckpoint, c.S)
		}
		seen[c.S] = true
	}
	return nil
}
