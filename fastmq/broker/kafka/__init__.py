"""The broker's Kafka front end: the listener and request dispatch (front.py), one module of handlers per area
(metadata, produce, fetch, offsets, groups, admin, sasl) and the partitions on the store (log.py)."""
