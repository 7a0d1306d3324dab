package worker

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var ledgerPlaceholderRE = regexp.MustCompile(`[#:][A-Za-z0-9]+`)

// exprInput returns the names and values an operation's expressions use, out of the ledger's
// placeholders and the values given: DynamoDB rejects unused ones.
func (l *ledgerCore) exprInput(vals map[string]types.AttributeValue, exprs ...string) (map[string]string, map[string]types.AttributeValue) {
	names := map[string]string{}
	used := map[string]types.AttributeValue{}
	for _, e := range exprs {
		ps, ok := l.placeholders[e]
		if !ok {
			ps = ledgerPlaceholderRE.FindAllString(e, -1)
		}
		for _, p := range ps {
			if p[0] == '#' {
				names[p] = l.names[p]
			} else if v, ok := vals[p]; ok {
				used[p] = v
			}
		}
	}
	if len(used) == 0 {
		used = nil
	}
	return names, used
}

func ledgerS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func ledgerN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func ledgerMillis(t time.Time) types.AttributeValue { return ledgerN(t.UnixMilli()) }

func fenceVals(c Claim) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":claimed": ledgerS(string(StatusClaimed)), ":owner": ledgerS(c.Owner), ":slot": ledgerN(int64(c.Slot)),
		":token": ledgerN(c.Token), ":attempt": ledgerN(int64(c.Attempt)),
	}
}

func (l *ledgerCore) claimRequestVals(r ClaimRequest) map[string]types.AttributeValue {
	vals := map[string]types.AttributeValue{
		":claimed": ledgerS(string(StatusClaimed)), ":retry": ledgerS(string(StatusRetry)),
		":done": ledgerS(string(StatusDone)), ":failed": ledgerS(string(StatusFailed)),
		":owner": ledgerS(r.Owner), ":slot": ledgerN(int64(r.Slot)), ":token": ledgerN(r.Token), ":scope": ledgerS(r.Scope),
		":now": ledgerMillis(r.Now), ":until": ledgerMillis(r.Until), ":one": ledgerN(1),
	}
	if l.row.claimVals != nil {
		l.row.claimVals(r.Key, vals)
	}
	return vals
}

// completeOnlyVals are the values of a complete-only write: the lean one (r.statusOnly) uses only
// the statuses, the time and the table ledger's row identity.
func (l *ledgerCore) completeOnlyVals(r ClaimRequest) map[string]types.AttributeValue {
	if !r.statusOnly {
		return l.claimRequestVals(r)
	}
	vals := map[string]types.AttributeValue{
		":done": ledgerS(string(StatusDone)), ":failed": ledgerS(string(StatusFailed)), ":now": ledgerMillis(r.Now),
	}
	if l.row.claimVals != nil {
		l.row.claimVals(r.Key, vals)
	}
	return vals
}

// truncateErrorText keeps the stored error under maxErrorText bytes of valid UTF-8.
func truncateErrorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	const mark = " ...(truncated)"
	cut := maxErrorText - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
