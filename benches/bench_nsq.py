"""NSQ clients side by side against one real nsqd v1.3.0 (tests/support/nsq.py), in one run: fastmq vs pynsq 0.9.1
(tornado 6.0.4) vs gnsq 1.0.2 (gevent) vs ansq 0.3.0 (asyncio), and nsq's own Go bench_writer / bench_reader as the
ceiling. ansq's Reader holds RDY 1 per connection (its set_max_in_flight is not implemented), so it is measured on
its own connection API (open_connection, subscribe with RDY 2500, fin), which is what its docs show for throughput.

- publish 100-byte messages one call per message (fastmq's publish() batches them into MPUB on the io loop; pynsq's
  Writer.pub and gnsq's publish(block=False) send one PUB each);
- MPUB batches of 100 x 100 bytes;
- consume 100-byte messages with max_in_flight 2500 (the backlog is published beforehand, untimed), finishing each.
CPU per record (cpu_ns) is this process's CPU time over the records (benches/conftest.py's CPUPerItem); for the Go
programs, their own CPU time (children's rusage) over the messages they report.

What the rates mean: publishing one message per call measures the client (every Python client is far below what
nsqd takes). MPUB moves the per-message work into nsqd: each client sends 100 messages a command, and nsqd's
ingest is the ceiling that bench_writer shows (it writes from GOMAXPROCS connections); there the client's own
CPU per message says more than its rate. "fastmq, 2 connections" publishes through connections_per_nsqd=2, as
bench_writer does on 2 cores: whether a second connection lets nsqd take more.

Run: pytest benches/bench_nsq.py --benchmark-only -s   (NSQ_BENCH_SCALE=0.1 for a short run)
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import uuid

import pytest

from tests.support.nsq import NSQD, build

BODY = b"x" * 100
SCALE = float(os.environ.get("NSQ_BENCH_SCALE", "1"))
# Messages per client: the slow clients get fewer so the run stays short; rates are per message. MPUB runs the same
# count for everyone (every client does 100k+ messages/s there, and a short run flatters one that nsqd absorbs).
COUNTS = {"fastmq": 1_000_000, "fastmq, 2 connections": 1_000_000, "pynsq": 200_000, "gnsq": 100_000,
          "ansq": 100_000}
MPUB_COUNT = 1_000_000
# pynsq and gnsq read ~1-2k messages/s here
CONSUME_COUNTS = {"fastmq": 1_000_000, "pynsq": 30_000, "gnsq": 10_000, "ansq": 100_000}
ANSQ_WINDOW = 1000                 # commands in flight at once, as for pynsq
BATCH = 100
MAX_IN_FLIGHT = 2500
GO_RUNFOR = "5s"


def count_for(client: str, counts: dict[str, int] = COUNTS) -> int:
    return max(1000, int(counts[client] * SCALE)) // BATCH * BATCH


@pytest.fixture(scope="module")
def nsqd(tmp_path_factory):
    server = NSQD(tmp_path_factory.mktemp("nsqd-bench"), extra_args=("--mem-queue-size=2000000",)).start()
    yield server
    server.stop()


def fresh_topic(client: str) -> str:
    return f"bench_{re.sub('[^a-z0-9]+', '_', client)}_{uuid.uuid4().hex[:8]}"


# ---- publishing ------------------------------------------------------------------------------------------------

def publish_fastmq(address: str, topic: str, count: int, batch: int, connections: int = 1) -> None:
    from fastmq.nsq import Producer

    with Producer(address, connections_per_nsqd=connections) as producer:
        if batch == 1:
            publish = producer.publish
            for _ in range(count):
                publish(topic, BODY)
        else:
            bodies = [BODY] * batch
            for _ in range(count // batch):
                producer.publish_many(topic, bodies)
        producer.flush(300)


def publish_pynsq(address: str, topic: str, count: int, batch: int) -> None:
    import nsq
    import tornado.ioloop

    loop = tornado.ioloop.IOLoop.current()
    writer = nsq.Writer([address])
    calls = count if batch == 1 else count // batch
    state = {"answered": 0, "sent": 0, "error": None}

    def answered(conn, data):
        if isinstance(data, Exception):
            state["error"] = data
        state["answered"] += 1
        if state["answered"] == calls:
            loop.stop()

    def send_some():
        # pynsq sends through its loop; keep a window of outstanding commands, as a user loop would.
        if not writer.conns:
            loop.call_later(0.01, send_some)
            return
        while state["sent"] < calls and state["sent"] - state["answered"] < 1000:
            if batch == 1:
                writer.pub(topic, BODY, answered)
            else:
                writer.mpub(topic, [BODY] * batch, answered)
            state["sent"] += 1
        if state["sent"] < calls:
            loop.call_later(0.0005, send_some)

    loop.add_callback(send_some)
    loop.start()
    for conn in list(writer.conns.values()):
        conn.close()
    assert state["error"] is None, state["error"]


def publish_gnsq(address: str, topic: str, count: int, batch: int) -> None:
    import gnsq

    producer = gnsq.Producer([address])
    producer.start()
    results = []
    if batch == 1:
        for index in range(count):
            results.append(producer.publish(topic, BODY, block=False))
            if len(results) >= 1000:
                wait_gnsq(results.pop(0))
    else:
        for _ in range(count // batch):
            results.append(producer.multipublish(topic, [BODY] * batch, block=False))
            if len(results) >= 100:
                wait_gnsq(results.pop(0))
    for result in results:
        wait_gnsq(result)
    producer.close()
    producer.join()


def wait_gnsq(result) -> None:
    if hasattr(result, "get"):      # an answer that came at once is returned as it is
        result.get()


def publish_ansq(address: str, topic: str, count: int, batch: int) -> None:
    import asyncio

    import ansq

    async def run() -> None:
        host, port = address.rsplit(":", 1)
        connection = await ansq.open_connection(host, int(port))
        try:
            calls = count if batch == 1 else count // batch
            bodies = [BODY] * batch
            for start in range(0, calls, ANSQ_WINDOW):
                window = min(ANSQ_WINDOW, calls - start)
                answers = await asyncio.gather(*(
                    connection.pub(topic, BODY) if batch == 1 else connection.mpub(topic, *bodies)
                    for _ in range(window)))
                assert all(answer.is_ok for answer in answers), answers[:3]
        finally:
            await connection.close()

    run_asyncio(run())


def run_asyncio(coroutine) -> None:
    # A loop of its own, never installed as the thread's current one: tornado (pynsq) asks asyncio for that one
    # later, and asyncio.run() would leave none behind.
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(coroutine)
    finally:
        loop.close()


def publish_fastmq_2(address: str, topic: str, count: int, batch: int) -> None:
    publish_fastmq(address, topic, count, batch, connections=2)


PUBLISHERS = {"fastmq": publish_fastmq, "fastmq, 2 connections": publish_fastmq_2, "pynsq": publish_pynsq,
              "gnsq": publish_gnsq, "ansq": publish_ansq}


@pytest.mark.parametrize("batch", [1, BATCH], ids=["PUB", "MPUB"])
@pytest.mark.parametrize("client", list(PUBLISHERS))
def test_publish(compare, nsqd, client, batch):
    count = count_for(client) if batch == 1 else count_for(client, dict.fromkeys(COUNTS, MPUB_COUNT))
    topic = fresh_topic(client)
    PUBLISHERS[client](nsqd.tcp_address, topic, BATCH, batch)       # connect once, create the topic
    name = "publish() per message" if batch == 1 else f"MPUB x{BATCH}"
    bench = compare(f"nsq {name}, 100 B", client, items=count, nbytes=count * len(BODY))
    bench.pedantic(PUBLISHERS[client], args=(nsqd.tcp_address, topic, count, batch), rounds=1, iterations=1)


# ---- consuming -------------------------------------------------------------------------------------------------

def consume_fastmq(address: str, topic: str, count: int) -> None:
    from fastmq.nsq import Consumer

    with Consumer(topic, "bench", nsqd_tcp_addresses=address, max_in_flight=MAX_IN_FLIGHT) as consumer:
        poll = consumer.poll
        for _ in range(count):
            message = poll(30)
            assert message is not None, "the backlog ran dry"
            message.finish()


def consume_pynsq(address: str, topic: str, count: int) -> None:
    import nsq
    import tornado.ioloop

    loop = tornado.ioloop.IOLoop.current()
    seen = [0]

    def handler(message):
        seen[0] += 1
        if seen[0] == count:
            message.finish()
            loop.add_callback(loop.stop)
            return None
        return True

    reader = nsq.Reader(topic=topic, channel="bench", message_handler=handler, nsqd_tcp_addresses=[address],
                        max_in_flight=MAX_IN_FLIGHT)
    loop.start()
    reader.close()


def consume_gnsq(address: str, topic: str, count: int) -> None:
    import gnsq

    consumer = gnsq.Consumer(topic, "bench", nsqd_tcp_addresses=[address], max_in_flight=MAX_IN_FLIGHT)
    seen = [0]

    @consumer.on_message.connect
    def handler(consumer, message):
        seen[0] += 1
        if seen[0] == count:
            consumer.close()

    consumer.start(block=True)


def consume_ansq(address: str, topic: str, count: int) -> None:
    import asyncio

    import ansq

    async def run() -> None:
        host, port = address.rsplit(":", 1)
        connection = await ansq.open_connection(host, int(port))
        try:
            await connection.subscribe(topic, "bench", MAX_IN_FLIGHT)
            seen = 0
            while seen < count:
                message = await asyncio.wait_for(connection.wait_for_message(), 30)
                assert message is not None, "the connection closed before the backlog was read"
                await message.fin()
                seen += 1               # (nsqd keeps RDY 2500 standing: in flight < RDY is what it checks)
        finally:
            await connection.close()

    run_asyncio(run())


CONSUMERS = {"fastmq": consume_fastmq, "pynsq": consume_pynsq, "gnsq": consume_gnsq, "ansq": consume_ansq}


@pytest.mark.parametrize("client", list(CONSUMERS))
def test_consume(compare, nsqd, client):
    count = count_for(client, CONSUME_COUNTS)
    topic = fresh_topic(client)
    nsqd.create_topic(topic, "bench")
    publish_fastmq(nsqd.tcp_address, topic, count, BATCH)               # the backlog, untimed
    bench = compare(f"nsq consume, max_in_flight {MAX_IN_FLIGHT}, 100 B", client, items=count,
                    nbytes=count * len(BODY))
    bench.pedantic(CONSUMERS[client], args=(nsqd.tcp_address, topic, count), rounds=1, iterations=1)


# ---- nsq's Go programs -----------------------------------------------------------------------------------------

def run_go(program: str, *args: str, runfor: str = GO_RUNFOR) -> tuple[float, float]:
    """Run bench_writer / bench_reader for `runfor`; returns the ops/s it prints and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(build() / program), f"--runfor={runfor}", *args], capture_output=True,
                          timeout=120, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = done.stdout + done.stderr
    match = re.search(r"([\d.]+)\s*ops/s", output)
    assert done.returncode == 0 and match, output
    return float(match.group(1)), after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def record_go(bench, program: str, *args: str) -> None:
    """Run a Go program as the benchmark's one round; its message count and CPU per message go in extra_info."""
    measured = [(0.0, 0.0)]
    bench.pedantic(lambda: measured.__setitem__(0, run_go(program, *args)), rounds=1, iterations=1)
    rate, cpu_s = measured[0]
    messages = int(rate * bench.stats.stats.median)
    bench.extra_info["items"] = messages
    bench.extra_info["cpu_ns"] = round(cpu_s * 1e9 / max(1, messages))


def test_go_bench_writer(compare, nsqd):
    bench = compare(f"nsq MPUB x{BATCH}, 100 B", "nsq bench_writer (Go)")
    record_go(bench, "bench_writer", f"--nsqd-tcp-address={nsqd.tcp_address}", f"--topic={fresh_topic('go')}",
              "--size=100", f"--batch-size={BATCH}")


def test_go_bench_reader(compare, nsqd):
    # bench_reader's rate means something only while a backlog is left when it stops: bench_writer fills one for
    # twice as long as the reader reads.
    topic = fresh_topic("goreader")
    nsqd.create_topic(topic, "ch")
    run_go("bench_writer", f"--nsqd-tcp-address={nsqd.tcp_address}", f"--topic={topic}", "--size=100",
           f"--batch-size={BATCH}", runfor="8s")
    bench = compare(f"nsq consume, max_in_flight {MAX_IN_FLIGHT}, 100 B", "nsq bench_reader (Go)")
    record_go(bench, "bench_reader", f"--nsqd-tcp-address={nsqd.tcp_address}", f"--topic={topic}", "--channel=ch",
              "--size=100", f"--rdy={MAX_IN_FLIGHT}")
    assert nsqd.topic_depth(topic, "ch")[0] > 0, "bench_reader emptied the backlog: its rate is too low"
