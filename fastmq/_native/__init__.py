"""fastmq's compiled layer. Not a public API: use fastmq.kafka, fastmq.store, ... instead."""
