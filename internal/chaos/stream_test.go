package chaos

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// img is a slot item image for the stream checker's tests.
type img struct {
	owner             string
	token, exp, acq   int64
	released, missing bool
	cp                string // checkpoint, "" for none
}

func (i img) attrs() map[string]stypes.AttributeValue {
	if i.missing {
		return nil
	}
	n := func(v int64) stypes.AttributeValue {
		return &stypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	m := map[string]stypes.AttributeValue{
		"pk": &stypes.AttributeValueMemberS{Value: "group#g"}, "sk": n(1),
		"token": n(i.token), "expires_at": n(i.exp),
		"acquired_at": n(i.acq), "released": &stypes.AttributeValueMemberBOOL{Value: i.released},
	}
	if i.owner != "" { // ResetGroup removes the attribute
		m["owner"] = &stypes.AttributeValueMemberS{Value: i.owner}
	}
	if i.cp != "" {
		m["checkpoint"] = &stypes.AttributeValueMemberS{Value: i.cp}
	}
	return m
}

func rec(old, cur img) stypes.Record {
	n := &stypes.AttributeValueMemberN{Value: "1"}
	return stypes.Record{Dynamodb: &stypes.StreamRecord{
		Keys:     map[string]stypes.AttributeValue{"pk": &stypes.AttributeValueMemberS{Value: "group#g"}, "sk": n},
		OldImage: old.attrs(), NewImage: cur.attrs(), SequenceNumber: aws.String("1"),
	}}
}

func TestStreamHistoryChecks(t *testing.T) {
	none := img{missing: true}
	w0t1 := img{owner: "w0", token: 1, acq: 1000, exp: 3000}
	for _, tc := range []struct {
		name  string
		recs  []stypes.Record
		wants string // substring of the one violation expected, "" for none
	}{
		{"first acquisition", []stypes.Record{rec(none, w0t1)}, ""},
		{"renew", []stypes.Record{rec(none, w0t1), rec(w0t1, img{owner: "w0", token: 1, acq: 1000, exp: 4000})}, ""},
		// The case polling misread: the holder's lease ran out by its own clock, it released the
		// slot and took it again at once, before its last expires_at.
		{"release then take again at once", []stypes.Record{
			rec(w0t1, img{owner: "w0", token: 1, acq: 1000, exp: 3000, released: true}),
			rec(img{owner: "w0", token: 1, acq: 1000, exp: 3000, released: true}, img{owner: "w0", token: 2, acq: 2000, exp: 4000}),
		}, ""},
		{"takeover after expiry", []stypes.Record{rec(w0t1, img{owner: "w1", token: 2, acq: 3000, exp: 5000})}, ""},
		{"takeover of a held lease", []stypes.Record{rec(w0t1, img{owner: "w1", token: 2, acq: 2999, exp: 5000})}, "while w0's token 1 was held until 3000"},
		{"token back", []stypes.Record{rec(img{owner: "w0", token: 3, exp: 1}, img{owner: "w1", token: 2, acq: 5})}, "went back from 3 to 2"},
		{"token jump", []stypes.Record{rec(img{owner: "w0", token: 1, released: true}, img{owner: "w1", token: 3})}, "jumped from 1 to 3"},
		{"owner change without a token", []stypes.Record{rec(w0t1, img{owner: "w1", token: 1, acq: 1000, exp: 3000})}, "changed owner from w0 to w1"},
		{"un-release", []stypes.Record{rec(img{owner: "w0", token: 1, released: true}, w0t1)}, "un-released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := streamHistory{owners: map[[2]int64]string{}}
			for _, r := range tc.recs {
				require.True(t, h.apply("group#g", r))
			}
			if tc.wants == "" {
				assert.Empty(t, h.violations)
				if tc.name == "release then take again at once" {
					assert.Equal(t, 1, h.releases)
					assert.Equal(t, 1, h.retakes)
				}
				return
			}
			require.Len(t, h.violations, 1, "%v", h.violations)
			assert.True(t, strings.Contains(h.violations[0], tc.wants), h.violations[0])
		})
	}
	h := streamHistory{owners: map[[2]int64]string{}}
	other := rec(none, w0t1)
	other.Dynamodb.Keys["pk"] = &stypes.AttributeValueMemberS{Value: "group#other"}
	assert.False(t, h.apply("group#g", other), "another group's item is not ours")
	assert.Zero(t, h.records)
}

// TestStreamHistoryToleratesResetGroup: ResetGroup removes the owner (and finished, checkpoint) of
// a slot and keeps its token; the next holder takes a new token. That one transition is not "a
// token with two owners", and the token keeps its first owner for the ledger audit. An owner
// removal that keeps the checkpoint is not a reset and is still flagged.
func TestStreamHistoryToleratesResetGroup(t *testing.T) {
	w0t1 := img{owner: "w0", token: 1, acq: 1000, exp: 3000, cp: "c1"}
	reset := img{token: 1, acq: 1000, exp: 3000}
	h := streamHistory{owners: map[[2]int64]string{}}
	h.apply("group#g", rec(img{missing: true}, w0t1))
	h.apply("group#g", rec(w0t1, reset))
	h.apply("group#g", rec(reset, img{owner: "w1", token: 2, acq: 4000, exp: 6000}))
	assert.Empty(t, h.violations)
	assert.Empty(t, h.gap)
	assert.Equal(t, 1, h.resets)
	assert.Equal(t, 2, h.acquires)
	assert.Equal(t, "w0", h.owners[[2]int64{1, 1}], "the reset does not take token 1 from w0 in the history")

	h = streamHistory{owners: map[[2]int64]string{}}
	h.apply("group#g", rec(img{missing: true}, w0t1))
	h.apply("group#g", rec(w0t1, img{token: 1, acq: 1000, exp: 3000, cp: "c1"}))
	require.Len(t, h.violations, 2, "%v", h.violations)
	assert.Contains(t, h.violations[0], "held by w0 and by ")
	assert.Zero(t, h.resets)
}

func TestStreamHistoryNoticesAMissingWrite(t *testing.T) {
	h := streamHistory{owners: map[[2]int64]string{}}
	a := img{owner: "w0", token: 1, acq: 1000, exp: 3000}
	b := img{owner: "w0", token: 1, acq: 1000, exp: 4000}
	c := img{owner: "w0", token: 1, acq: 1000, exp: 5000}
	h.apply("group#g", rec(img{missing: true}, a))
	h.apply("group#g", rec(a, b))
	assert.Empty(t, h.gap)
	h.apply("group#g", rec(a, c)) // the write b -> a' is missing
	assert.Contains(t, h.gap, "a write is missing")
}

func TestSeqAfter(t *testing.T) {
	assert.True(t, seqAfter("000000000000000000010", "000000000000000000009"))
	assert.False(t, seqAfter("000000000000000000009", "000000000000000000009"))
	assert.True(t, seqAfter("1000", "999"))
}
