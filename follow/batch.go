package follow

import (
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Batch is one GetRecords page of a shard, handed to Run's fn. The shard's next page is read only
// once the batch is Done, so the records of one item key, which a shard holds in write order, are
// dealt with in that order.
type Batch struct {
	// Shard is the shard the records come from.
	Shard string
	// Records are in shard order (sequence numbers rising).
	Records []stypes.Record

	once sync.Once
	done chan struct{} // closed by Done
}

func newBatch(shard string, recs []stypes.Record) *Batch {
	return &Batch{Shard: shard, Records: recs, done: make(chan struct{})}
}

// Done says every record of the batch has been dealt with: the shard's checkpoint may move past
// its last record. It is idempotent and safe from any goroutine. Once the shard's lease is lost,
// Done has no effect: the batch is read again by the shard's next holder.
func (b *Batch) Done() {
	b.once.Do(func() {
		if b.done != nil {
			close(b.done)
		}
	})
}

// isDone reports whether Done has been called.
func (b *Batch) isDone() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// last is the sequence number of the batch's last record: the checkpoint once it is Done.
func (b *Batch) last() string {
	for i := len(b.Records) - 1; i >= 0; i-- {
		if d := b.Records[i].Dynamodb; d != nil && d.SequenceNumber != nil {
			return aws.ToString(d.SequenceNumber)
		}
	}
	return ""
}

// oldest is the creation time of the batch's first record (zero when unknown): the age of the
// batch, for ShardStat.Lag.
func (b *Batch) oldest() time.Time {
	for _, r := range b.Records {
		if d := r.Dynamodb; d != nil && d.ApproximateCreationDateTime != nil {
			return *d.ApproximateCreationDateTime
		}
	}
	return time.Time{}
}
