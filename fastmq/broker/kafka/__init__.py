"""The broker's Kafka front end, registered as "kafka": the broker's Kafka state (frontend.py), the listeners and
request dispatch (front.py), one module of handlers per area (metadata, produce, fetch, offsets, groups, admin,
sasl, txn), the partitions on the store (log.py) and the mapping of the core's errors to Kafka's codes
(errors.py)."""
from fastmq.broker.frontends import register
from fastmq.broker.kafka.frontend import KafkaFrontEnd

register("kafka", KafkaFrontEnd)
