"""fastmq.tubemq: an Apache InLong TubeMQ client (RPC codec, producer, pull and push consumers)."""
