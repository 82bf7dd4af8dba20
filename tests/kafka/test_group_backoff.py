"""The group member's retries (coordinator lookup, join, heartbeat, auto-commit) back off like the client's other
retries: from retry_backoff_ms, doubling per failure in a row up to retry_backoff_max_ms, each step on its own
count, and back to the start after a success."""
from __future__ import annotations

import uuid

from fastmq.kafka.consumer import Consumer

JITTER = 0.2        # the client's backoff spreads each delay by +-20%


def test_each_step_backs_off_on_its_own_and_resets_after_a_success(embedded_broker):
    consumer = Consumer(bootstrap_servers=embedded_broker.bootstrap_servers, group_id=f"g-{uuid.uuid4().hex}",
                        retry_backoff_ms=50, retry_backoff_max_ms=400)
    try:
        consumer.subscribe([f"t-{uuid.uuid4().hex}"])
        group = consumer._coordinator
        delays = [group._backoff("join") for _ in range(6)]
        for delay, expected in zip(delays, [0.05, 0.1, 0.2, 0.4, 0.4, 0.4]):
            assert expected * (1 - JITTER) <= delay <= expected * (1 + JITTER)
        assert group._backoff("heartbeat") <= 0.05 * (1 + JITTER)     # another step counts its own failures
        group._succeeded("join")
        assert group._backoff("join") <= 0.05 * (1 + JITTER)
    finally:
        consumer.close()
