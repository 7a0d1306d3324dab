package ledger

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// batchGetLimit is the most keys one BatchGetItem reads.
const batchGetLimit = 100

// States implements Ledger: the rows of the items' keys, read 100 to a request (consistent).
func (l *Table) States(ctx context.Context, items []map[string]types.AttributeValue) ([]ItemState, error) {
	rowKeys := make([]Key, len(items))
	for i, it := range items {
		rk, err := l.core.row.key(it)
		if err != nil {
			return nil, err
		}
		rowKeys[i] = rk
	}
	out := make([]ItemState, len(items))
	for lo := 0; lo < len(items); lo += batchGetLimit {
		idxs := make([]int, 0, batchGetLimit)
		for i := lo; i < min(lo+batchGetLimit, len(items)); i++ {
			idxs = append(idxs, i)
		}
		rows, err := l.core.readRows(ctx, rowKeys, idxs)
		if err != nil {
			return nil, err
		}
		for _, i := range idxs {
			out[i] = l.core.decodeState(rows[l.core.rowID(rowKeys[i])])
		}
	}
	return out, nil
}
