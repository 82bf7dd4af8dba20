"""fastmq's Kafka client: wire protocol, record batches, producer, consumer, admin client."""
