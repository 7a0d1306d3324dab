package scan_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

func samplePosition() scan.Position {
	return scan.Position{Table: "users", Mode: scan.ModeSegment, TotalSegments: 8, Cursors: []scan.Cursor{
		{TotalSegments: 8, Segment: 4, LastEvaluatedKey: map[string]types.AttributeValue{"id": s("user-17"), "ts": n("-12.5")}},
		{TotalSegments: 8, Segment: 5, Done: true},
		{TotalSegments: 8, Segment: 6},
		{TotalSegments: 8, Segment: 7, LastEvaluatedKey: map[string]types.AttributeValue{"bin": b([]byte{0, 1, 254, 255})}},
	}}
}

func TestCheckpointRoundTrip(t *testing.T) {
	p := samplePosition()
	enc, err := scan.EncodeCheckpoint(p)
	require.NoError(t, err)
	require.Less(t, len(enc), 220, "compact: %s", enc)
	got, err := scan.DecodeCheckpoint(enc)
	require.NoError(t, err)
	require.Equal(t, p, got)

	again, err := scan.EncodeCheckpoint(got)
	require.NoError(t, err)
	require.Equal(t, enc, again, "stable encoding")
}

func TestEncodeCheckpointRefuses(t *testing.T) {
	p := samplePosition()
	p.Cursors[1].TotalSegments = 16
	_, err := scan.EncodeCheckpoint(p)
	require.ErrorIs(t, err, scan.ErrCheckpointMismatch)

	p = samplePosition()
	p.Cursors[0].LastEvaluatedKey["id"] = &types.AttributeValueMemberBOOL{Value: true}
	_, err = scan.EncodeCheckpoint(p)
	require.ErrorIs(t, err, scan.ErrBadCheckpoint)

	p = samplePosition()
	p.Cursors[2].Segment = 4 // twice
	_, err = scan.EncodeCheckpoint(p)
	require.ErrorIs(t, err, scan.ErrBadCheckpoint)
}

func TestDecodeCheckpointMalformed(t *testing.T) {
	good, err := scan.EncodeCheckpoint(samplePosition())
	require.NoError(t, err)
	for name, v := range map[string]string{
		"empty":            "",
		"not json":         "segment 4 at user-17",
		"truncated":        good[:len(good)/2],
		"trailing":         good + "{}",
		"wrong version":    strings.Replace(good, `"v":1`, `"v":2`, 1),
		"no table":         `{"v":1,"t":"","n":2,"c":[]}`,
		"zero segments":    `{"v":1,"t":"x","n":0,"c":[]}`,
		"segment range":    `{"v":1,"t":"x","n":2,"c":[{"s":2}]}`,
		"negative segment": `{"v":1,"t":"x","n":2,"c":[{"s":-1}]}`,
		"duplicate":        `{"v":1,"t":"x","n":2,"c":[{"s":1},{"s":1}]}`,
		"done with key":    `{"v":1,"t":"x","n":2,"c":[{"s":1,"d":true,"k":{"id":{"S":"a"}}}]}`,
		"two types":        `{"v":1,"t":"x","n":2,"c":[{"s":1,"k":{"id":{"S":"a","N":"1"}}}]}`,
		"no type":          `{"v":1,"t":"x","n":2,"c":[{"s":1,"k":{"id":{}}}]}`,
		"bad number":       `{"v":1,"t":"x","n":2,"c":[{"s":1,"k":{"id":{"N":"one"}}}]}`,
		"bad base64":       `{"v":1,"t":"x","n":2,"c":[{"s":1,"k":{"id":{"B":"!!"}}}]}`,
		"unknown mode":     `{"v":1,"t":"x","m":"random","n":2,"c":[]}`,
		"unknown field":    `{"v":1,"t":"x","n":2,"c":[],"z":1}`,
		"wrong types":      `{"v":"1","t":"x","n":2,"c":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := scan.DecodeCheckpoint(v)
			require.ErrorIs(t, err, scan.ErrBadCheckpoint)
		})
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	good, err := scan.EncodeCheckpoint(samplePosition())
	require.NoError(f, err)
	f.Add(good)
	f.Add(`{"v":1,"t":"x","n":1,"c":[{"s":0,"d":true}]}`)
	f.Add(`{"v":1,"t":"x","n":3,"c":[{"s":2,"k":{"a":{"B":"AAE="},"b":{"N":"1e5"}}}]}`)
	f.Add(`{"v":1,"t":"x","n":1e9,"c":null}`)
	f.Add(`[]`)
	f.Add("\xff\x00")
	f.Fuzz(func(t *testing.T, v string) {
		p, err := scan.DecodeCheckpoint(v)
		if err != nil {
			require.ErrorIs(t, err, scan.ErrBadCheckpoint)
			return
		}
		// Whatever decodes, encodes again to the same position.
		enc, err := scan.EncodeCheckpoint(p)
		require.NoError(t, err)
		back, err := scan.DecodeCheckpoint(enc)
		require.NoError(t, err)
		require.Equal(t, p, back)
	})
}

// noClient satisfies DynamoDBClient for tests of New, which makes no request.
type noClient struct{}

func (noClient) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errors.New("unexpected Scan")
}

func (noClient) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, errors.New("unexpected Query")
}

func (noClient) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, errors.New("unexpected DescribeTable")
}

func TestResumeMismatch(t *testing.T) {
	base := scan.Config{Client: noClient{}, Table: "users", Plan: scan.Plan{Mode: scan.ModeSegment, Slots: 2, SubSegments: 4}, Slot: 1}
	cp := func(p scan.Position) string {
		v, err := scan.EncodeCheckpoint(p)
		require.NoError(t, err)
		return v
	}
	ok := scan.Position{Table: "users", Mode: scan.ModeSegment, TotalSegments: 8, Cursors: []scan.Cursor{{Segment: 5, Done: true}}}
	cfg := base
	cfg.Resume = cp(ok)
	_, err := scan.New(cfg)
	require.NoError(t, err)

	for name, c := range map[string]struct {
		mutate func(*scan.Config, *scan.Position)
		want   error
	}{
		"other table":         {func(_ *scan.Config, p *scan.Position) { p.Table = "orders" }, scan.ErrCheckpointMismatch},
		"other TotalSegments": {func(_ *scan.Config, p *scan.Position) { p.TotalSegments = 16 }, scan.ErrCheckpointMismatch},
		"other N":             {func(c *scan.Config, _ *scan.Position) { c.Plan.Slots = 4 }, scan.ErrCheckpointMismatch},
		"other mode":          {func(c *scan.Config, _ *scan.Position) { c.Plan.Mode = scan.ModeFilter }, scan.ErrCheckpointMismatch},
		"other slot":          {func(c *scan.Config, _ *scan.Position) { c.Slot = 0 }, scan.ErrCheckpointMismatch},
		"other index": {func(c *scan.Config, p *scan.Position) {
			c.Plan.Mode, c.IndexName, c.ShardAttr, c.Shards, c.Slot = scan.ModeIndex, "pending", "shard", 8, 1
			p.Mode, p.Index = scan.ModeIndex, "other"
		}, scan.ErrCheckpointMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, p := base, ok
			p.Cursors = append([]scan.Cursor(nil), ok.Cursors...)
			c.mutate(&cfg, &p)
			cfg.Resume = cp(p)
			_, err := scan.New(cfg)
			require.ErrorIs(t, err, c.want)
		})
	}
	cfg = base
	cfg.Resume = "garbage"
	_, err = scan.New(cfg)
	require.ErrorIs(t, err, scan.ErrBadCheckpoint)
}

func TestNewValidates(t *testing.T) {
	ok := scan.Config{Client: noClient{}, Table: "t", Plan: scan.Plan{Slots: 2}}
	for field, mutate := range map[string]func(*scan.Config){
		"Client":           func(c *scan.Config) { c.Client = nil },
		"Table":            func(c *scan.Config) { c.Table = "" },
		"Plan.Mode":        func(c *scan.Config) { c.Plan.Mode = "random" },
		"Plan.Slots":       func(c *scan.Config) { c.Plan.Slots = 0 },
		"Plan.SubSegments": func(c *scan.Config) { c.Plan.SubSegments = -1 },
		"Slot":             func(c *scan.Config) { c.Slot = 2 },
		"ReadRate":         func(c *scan.Config) { c.ReadRate = -1 },
		"PageLimit":        func(c *scan.Config) { c.PageLimit = -1 },
		"MaxUnackedPages":  func(c *scan.Config) { c.MaxUnackedPages = -1 },
		"IndexName":        func(c *scan.Config) { c.Plan.Mode, c.ShardAttr, c.Shards = scan.ModeIndex, "s", 4 },
		"ShardAttr":        func(c *scan.Config) { c.Plan.Mode, c.IndexName, c.Shards = scan.ModeIndex, "i", 4 },
		"Shards":           func(c *scan.Config) { c.Plan.Mode, c.IndexName, c.ShardAttr = scan.ModeIndex, "i", "s" },
		"ConsistentRead": func(c *scan.Config) {
			c.Plan.Mode, c.IndexName, c.ShardAttr, c.Shards, c.ConsistentRead = scan.ModeIndex, "i", "s", 4, true
		},
	} {
		t.Run(field, func(t *testing.T) {
			cfg := ok
			mutate(&cfg)
			_, err := scan.New(cfg)
			var ce *scan.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, field, ce.Field)
		})
	}
	for _, rate := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		cfg := ok
		cfg.ReadRate = rate
		_, err := scan.New(cfg)
		var ce *scan.ConfigError
		require.ErrorAs(t, err, &ce, "ReadRate %v", rate)
		require.Equal(t, "ReadRate", ce.Field)
	}
	huge := ok
	huge.Plan.Mode, huge.IndexName, huge.ShardAttr, huge.Shards, huge.Plan.SubSegments = scan.ModeIndex, "i", "s", 4, math.MaxInt/2+1
	_, err := scan.New(huge) // used to panic making a channel of 2 x SubSegments
	var ce *scan.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Plan.SubSegments", ce.Field)
	_, err = scan.New(ok)
	require.NoError(t, err)
}

func TestPlan(t *testing.T) {
	p := scan.Plan{Mode: scan.ModeSegment, Slots: 3, SubSegments: 2}
	require.NoError(t, p.Validate())
	require.Equal(t, 6, p.TotalSegments())
	require.Equal(t, []int{0, 1}, p.Segments(0))
	require.Equal(t, []int{4, 5}, p.Segments(2))
	require.Nil(t, p.Segments(3))
	// Every segment belongs to exactly one slot.
	seen := map[int]int{}
	for slot := range 3 {
		for _, seg := range p.Segments(slot) {
			seen[seg]++
		}
	}
	require.Len(t, seen, 6)
	for _, c := range seen {
		require.Equal(t, 1, c)
	}

	f := scan.Plan{Mode: scan.ModeFilter, Slots: 3}
	require.Equal(t, 12, f.TotalSegments(), "SubSegments defaults to 4")
	require.Len(t, f.Segments(1), 12)
	require.Equal(t, 0, scan.Plan{Mode: scan.ModeIndex, Slots: 3}.TotalSegments())
	require.Equal(t, 4, scan.Plan{Slots: 1}.TotalSegments(), "mode defaults to segment")

	for _, m := range []scan.Mode{scan.ModeSegment, scan.ModeFilter, scan.ModeIndex} {
		got, err := scan.ParseMode(string(m))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := scan.ParseMode("Segment")
	require.Error(t, err)
}

func ExamplePlan_Segments() {
	p := scan.Plan{Mode: scan.ModeSegment, Slots: 3, SubSegments: 2}
	for slot := range p.Slots {
		fmt.Println(slot, p.Segments(slot))
	}
	fmt.Println(p.TotalSegments())
	// Output:
	// 0 [0 1]
	// 1 [2 3]
	// 2 [4 5]
	// 6
}

func BenchmarkEncodeCheckpoint(b *testing.B) {
	p := samplePosition()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scan.EncodeCheckpoint(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCheckpoint(b *testing.B) {
	v, err := scan.EncodeCheckpoint(samplePosition())
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scan.DecodeCheckpoint(v); err != nil {
			b.Fatal(err)
		}
	}
}
