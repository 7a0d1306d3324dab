package ledger

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A job's handler returns effects of the same shape for every item (the same attributes set,
// added to and removed), and the SDK's expression builder costs about ten times the rest of a
// complete-only write's preparation (BenchmarkItemEffectPlan). So renderChangesOnce builds a
// shape's update expression with the SDK once, from stand-in values, and fills its value
// placeholders with each call's values.

// renderedShape is the update expression of a list of changes of one shape.
type renderedShape struct {
	set, remove, add []string
	names            map[string]string
	placeholders     []string // per change, the placeholder of its value ("" for a remove)
}

// shapes holds the shapes rendered so far, up to maxShapes (a handler that makes up attribute
// names per item renders each of its shapes anew).
var shapes = struct {
	sync.Mutex
	m map[string]*renderedShape
}{m: map[string]*renderedShape{}}

const maxShapes = 256

// renderChangesOnce is renderChanges without a condition, with the expression of cs's shape built
// once.
func renderChangesOnce(cs []Change) (*clauses, error) {
	key := shapeKey(cs)
	shapes.Lock()
	rs := shapes.m[key]
	shapes.Unlock()
	if rs == nil {
		var err error
		if rs, err = renderShape(cs); err != nil {
			return nil, err
		}
		shapes.Lock()
		if len(shapes.m) < maxShapes {
			shapes.m[key] = rs
		}
		shapes.Unlock()
	}
	return rs.with(cs), nil
}

// shapeKey names cs's shape: each change's kind and attribute name.
func shapeKey(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(strconv.Itoa(int(c.kind)))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(c.name)))
		b.WriteByte(':')
		b.WriteString(c.name)
	}
	return b.String()
}

// renderShape builds cs's expression with the SDK from a stand-in value per change, and finds the
// placeholder each stand-in got.
func renderShape(cs []Change) (*renderedShape, error) {
	standIns := make([]Change, len(cs))
	index := make(map[string]int, len(cs))
	for i, c := range cs {
		standIns[i] = c
		if c.kind != changeRemove {
			v := fmt.Sprintf("\x00dynapart stand-in %d", i)
			standIns[i].value = &types.AttributeValueMemberS{Value: v}
			index[v] = i
		}
	}
	c, _, err := renderChanges(standIns, nil)
	if err != nil {
		return nil, err
	}
	rs := &renderedShape{set: c.set, remove: c.remove, add: c.add, names: c.names, placeholders: make([]string, len(cs))}
	for ph, v := range c.values {
		s, ok := v.(*types.AttributeValueMemberS)
		i, found := 0, false
		if ok {
			i, found = index[s.Value]
		}
		if !found {
			return nil, fmt.Errorf("the update expression has a value placeholder %s of no change", ph)
		}
		rs.placeholders[i] = ph
	}
	for i, c := range cs {
		if c.kind != changeRemove && rs.placeholders[i] == "" {
			return nil, fmt.Errorf("the update expression has no placeholder for the value of %q", c.name)
		}
	}
	return rs, nil
}

// with is the shape's clauses for cs (of this shape), with cs's values. They share the shape's
// expression parts and names, which nothing writes.
func (rs *renderedShape) with(cs []Change) *clauses {
	values := make(map[string]types.AttributeValue, len(cs))
	for i, c := range cs {
		if ph := rs.placeholders[i]; ph != "" {
			values[ph] = c.value
		}
	}
	return &clauses{set: rs.set, remove: rs.remove, add: rs.add, names: rs.names, values: values, shape: rs}
}
