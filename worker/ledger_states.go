package worker

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// pageStater gives the ledger state of items just scanned, for decisions the worker makes before a
// handler runs where no claim makes them (complete-only mode). Both ledgers implement it: the inline
// ledger's state is on the scanned item itself; the table ledger's rows are read, 100 to a call.
type pageStater interface {
	pageStates(ctx context.Context, items []map[string]types.AttributeValue, keys []Key) ([]ItemState, error)
}

func (l *InlineLedger) pageStates(_ context.Context, items []map[string]types.AttributeValue, _ []Key) ([]ItemState, error) {
	out := make([]ItemState, len(items))
	for i, it := range items {
		out[i] = l.core.decodeState(it)
	}
	return out, nil
}

// batchGetLimit is the most keys one BatchGetItem reads.
const batchGetLimit = 100

func (l *TableLedger) pageStates(ctx context.Context, _ []map[string]types.AttributeValue, keys []Key) ([]ItemState, error) {
	rowKeys := make([]Key, len(keys))
	for i, k := range keys {
		rk, err := l.core.row.key(k)
		if err != nil {
			return nil, err
		}
		rowKeys[i] = rk
	}
	out := make([]ItemState, len(keys))
	for lo := 0; lo < len(keys); lo += batchGetLimit {
		idxs := make([]int, 0, batchGetLimit)
		for i := lo; i < min(lo+batchGetLimit, len(keys)); i++ {
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
