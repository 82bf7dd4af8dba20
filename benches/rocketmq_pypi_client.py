"""PyPI `rocketmq` 0.4.4 (ctypes over the C++ client) in a child process of bench_rocketmq.py, so that its C++
threads and logs stay out of the bench process and its CPU time is its own. Usage:
python rocketmq_pypi_client.py NAMESRV; then one command a line on stdin, "MODE TOPIC COUNT", MODE one of sync,
async, oneway, batch, consume (a 4th field is ignored); it answers "done CPU_NS" (process CPU time of the work) or "error TEXT"."""
from __future__ import annotations

import queue
import sys
import time
import uuid

from rocketmq.client import Message, Producer, PullConsumer

BODY = b"x" * 100
ASYNC_IN_FLIGHT = 10_000
BATCH = 100
CLOSING_SEND_ATTEMPTS = 300     # the sync send closing a oneway run, 0.1 s apart


def message(topic: str) -> Message:
    m = Message(topic)
    m.set_body(BODY)
    return m


def produce(producer: Producer, mode: str, topic: str, count: int) -> None:
    if mode == "sync":
        for _ in range(count):
            producer.send_sync(message(topic))
    elif mode == "oneway":
        for _ in range(count):
            producer.send_oneway(message(topic))
        for attempt in range(CLOSING_SEND_ATTEMPTS):    # the broker answers SYSTEM_BUSY while its send queue is full
            try:
                producer.send_sync(message(topic))
                break
            except Exception:
                if attempt == CLOSING_SEND_ATTEMPTS - 1:
                    raise
                time.sleep(0.1)
    elif mode == "batch":
        for start in range(0, count, BATCH):
            producer.send_batch([message(topic) for _ in range(min(BATCH, count - start))])
    elif mode == "async":
        tokens: queue.SimpleQueue = queue.SimpleQueue()   # one a send in flight: as bench_rocketmq's fastmq row
        for _ in range(ASYNC_IN_FLIGHT):
            tokens.put(None)
        failures = []
        for _ in range(count):
            tokens.get()
            producer.send_async(message(topic), lambda _result: tokens.put(None),
                                lambda error: (failures.append(error), tokens.put(None)))
        for _ in range(ASYNC_IN_FLIGHT):
            tokens.get()
        if failures:
            raise RuntimeError(f"{len(failures)} async sends failed: {failures[0]}")
    else:
        raise ValueError(f"unknown mode {mode}")


def consume(namesrv: str, topic: str, count: int) -> None:
    consumer = PullConsumer(f"bench-pypi-{uuid.uuid4().hex[:8]}")
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    try:
        seen = 0
        deadline = time.monotonic() + 3600
        while seen < count and time.monotonic() < deadline:
            for _ in consumer.pull(topic):
                seen += 1
        if seen < count:
            raise RuntimeError(f"consumed {seen} of {count}")
    finally:
        consumer.shutdown()


def main(namesrv: str) -> None:
    producer = Producer(f"bench-pypi-{uuid.uuid4().hex[:8]}")
    producer.set_namesrv_addr(namesrv)
    producer.set_timeout(30000)
    producer.start()
    try:
        for line in sys.stdin:
            mode, topic, count = line.split()[:3]     # a 4th field (a group) is for the Java program
            started = time.process_time()
            try:
                if mode == "consume":
                    consume(namesrv, topic, int(count))
                else:
                    produce(producer, mode, topic, int(count))
            except Exception as exc:
                print(f"error {exc!r}", flush=True)
                continue
            print(f"done {int((time.process_time() - started) * 1e9)}", flush=True)
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
