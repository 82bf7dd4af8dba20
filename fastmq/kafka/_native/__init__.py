"""The Kafka client's compiled part: record batches (v2 and legacy), the protocol codec, fetch and columnar
decode, and the Kafka batch builder of the producer's accumulator. Not a public API: use fastmq.kafka."""
