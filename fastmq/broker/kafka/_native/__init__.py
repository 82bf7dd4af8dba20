"""The compiled part of the broker's Kafka front end: Kafka record batches to and from store messages."""
