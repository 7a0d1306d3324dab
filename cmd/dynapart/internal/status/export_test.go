package status

// StreamShard names a shard of the document's stream for the package's external tests.
type StreamShard = shardDoc
