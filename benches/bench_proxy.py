"""The HTTP proxy (fastmq proxy) on loopback, against an embedded broker in its own process and Debian's
redis-server: produce requests/s with one message per request and with batches of 100 (with one and with two
proxy processes), compared with fastmq's Producer sending the same messages directly; consume+ack round trips/s
(GET /message max=1, then POST /ack) with one and with two proxy processes; and the Redis round trips per consumed
message (the scripts the proxies ran,
EVALSHA calls counted by Redis' commandstats; the registry's re-read, one pipelined round trip per second per
process, is left out). The machine is shared: beside the wall-clock rates, the proxy processes' CPU time per
operation is printed, and what one fully used core would serve at that cost.

The load generator is an asyncio (uvloop) HTTP/1.1 client with keep-alive connections in this process.
Run: pytest benches/bench_proxy.py --benchmark-only -s   (BENCH_PROXY_SCALE=0.1 for a quick run)
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import orjson
import pytest

from fastmq.broker import BrokerProcess
from benches.process_cpu import process_tree_cpu, tree_cpu_seconds
from tests.proxy.processes import proxy_process
from tests.support.redis import start_redis
from tests.support.servers import free_port

SCALE = float(os.environ.get("BENCH_PROXY_SCALE", "1"))
SINGLE_REQUESTS = int(20_000 * SCALE)
BATCH = 100
BATCH_REQUESTS = int(2_000 * SCALE)
CONSUMED = int(10_000 * SCALE)
CONNECTIONS = 32
# A queue is locked by one consumer at a time: as many queues as consuming connections, so that a consumer
# rarely finds every queue locked (an "empty" answer, which it would ask again at once).
PARTITIONS = 16
CONSUMING_CONNECTIONS = 16
VALUE = b"x" * 100
CONFIG = """
redis_url = "{redis_url}"
namespace = "bench"
bounds_max_age_s = 1.0
[producers.bench-writer]
topic = "bench-in"
[consumers.bench-reader]
topic = "bench-out"
lease_ms = 30000
"""


class HttpConnection:
    """One keep-alive HTTP/1.1 connection; request() answers (status, body)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> HttpConnection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, method: str, target: str, body: bytes = b"", content_type: str = "text/plain"
                      ) -> tuple[int, bytes]:
        self.writer.write(f"{method} {target} HTTP/1.1\r\nhost: bench\r\ncontent-type: {content_type}\r\n"
                          f"content-length: {len(body)}\r\n\r\n".encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return int(head[9:12]), await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def _load(port: int, total: int, one: "callable", connections: int) -> int:
    """`total` operations over `connections` connections; returns how many succeeded."""
    remaining = [total]
    done = [0]

    async def worker() -> None:
        connection = await HttpConnection.open(port)
        try:
            while remaining[0] > 0:
                remaining[0] -= 1
                succeeded = await one(connection)        # (not `done[0] += await ...`: that loses updates)
                done[0] += succeeded
        finally:
            connection.close()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return done[0]


def load(port: int, total: int, one, connections: int = CONNECTIONS) -> int:
    import uvloop
    return uvloop.run(_load(port, total, one, connections))


async def produce_one(connection: HttpConnection) -> int:
    status, _ = await connection.request("POST", "/produce?producer=bench-writer", VALUE)
    return status == 200


BATCH_BODY = json.dumps({"producer": "bench-writer",
                         "messages": [{"value": VALUE.decode()} for _ in range(BATCH)]}).encode()


async def produce_batch(connection: HttpConnection) -> int:
    status, _ = await connection.request("POST", "/produce", BATCH_BODY, "application/json")
    return status == 200


async def consume_and_ack(connection: HttpConnection) -> int:
    status, body = await connection.request("GET", "/message?consumer=bench-reader&max=1")
    token = orjson.loads(body)["token"] if status == 200 else None
    if token is None:
        return 0
    ack = orjson.dumps({"consumer": "bench-reader", "token": token})
    status, _ = await connection.request("POST", "/ack", ack, "application/json")
    return status == 200


def loop_waits(pid: int) -> int:
    """How many times the proxy processes' main threads slept (voluntary context switches: each an event loop
    that found nothing to do and waited in epoll), summed over the process tree."""
    waits = 0
    for child in process_tree_cpu(pid):
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        waits += int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    return waits


def measured(bench, process, operations: int, label: str, run) -> None:
    """Run `run` once under the benchmark and print the proxy's CPU time per operation, and how often its event
    loops waited per operation (the fewer requests a loop turn serves, the more each costs)."""
    cpu, waits = tree_cpu_seconds(process.pid), loop_waits(process.pid)
    started = time.perf_counter()
    bench.pedantic(run, rounds=1, iterations=1)
    elapsed = time.perf_counter() - started
    used = tree_cpu_seconds(process.pid) - cpu
    waited = loop_waits(process.pid) - waits
    print(f"\n{label}: {operations} in {elapsed:.2f} s ({operations / elapsed:,.0f}/s wall clock); proxy CPU "
          f"{used / operations * 1e6:,.2f} us each ({operations / used if used else 0:,.0f}/s per fully used core); "
          f"event-loop waits {waited / operations:.2f} each")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import redis
    from fastmq.kafka import Admin, Producer
    from fastmq.kafka.admin import NewTopic

    directory = tmp_path_factory.mktemp("bench-proxy")
    broker = BrokerProcess().start()
    redis_process, redis_url = start_redis(directory)
    config = directory / "proxy.toml"
    config.write_text(CONFIG.format(redis_url=redis_url))
    started = []
    try:
        with Admin(broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("bench-in", 4, 1), NewTopic("bench-out", PARTITIONS, 1)])
            admin.wait_for_topics(["bench-in", "bench-out"], timeout=30)
        # What the consume benchmarks read (CONSUMED for each of the three), written directly.
        with Producer(broker.bootstrap_servers, linger_ms=5) as producer:
            for n in range(CONSUMED * 3 + 10_000):
                producer.send("bench-out", VALUE, key=str(n).encode())
            producer.flush(120)

        def proxies(count: int):
            port = free_port()
            process = proxy_process(f"proxy-x{count}", config, broker.bootstrap_servers, port,
                                    directory / f"proxy-{count}.log", processes=count).start()
            started.append(process)
            return port, process
        yield {"proxies": proxies, "redis": redis.Redis.from_url(redis_url), "bootstrap": broker.bootstrap_servers}
    finally:
        for process in started:
            process.stop()
        redis_process.stop()
        broker.close()


@pytest.fixture(scope="module")
def one_proxy(setup):
    return setup["proxies"](1)


@pytest.fixture(scope="module")
def two_proxies(setup):
    return setup["proxies"](2)


def proxy_with(request, processes: int):
    """(port, process) of the module's proxy with that many processes."""
    return request.getfixturevalue("one_proxy" if processes == 1 else "two_proxies")


async def health(connection: HttpConnection) -> int:
    status, _ = await connection.request("GET", "/healthz")
    return status == 200


def test_calibration_bare_requests(compare, one_proxy):
    """GET /healthz (no Redis, no broker): what the HTTP stack alone costs on this machine, to read the rest by."""
    port, process = one_proxy
    bench = compare("proxy: GET /healthz (the HTTP stack alone)", "fastmq-proxy", items=SINGLE_REQUESTS)
    measured(bench, process, SINGLE_REQUESTS, "GET /healthz", lambda: load(port, SINGLE_REQUESTS, health))


def test_produce_single_messages(compare, one_proxy):
    port, process = one_proxy
    load(port, 500, produce_one)                                      # warm up: connections, metadata
    bench = compare("proxy: produce 100 B messages", "fastmq-proxy 1 msg/request", items=SINGLE_REQUESTS)
    measured(bench, process, SINGLE_REQUESTS, "produce, 1 message per request",
             lambda: load(port, SINGLE_REQUESTS, produce_one))


@pytest.mark.parametrize("processes", [1, 2])
def test_produce_batches(compare, request, processes):
    port, process = proxy_with(request, processes)
    load(port, 50, produce_batch)
    bench = compare("proxy: produce 100 B messages", f"fastmq-proxy {BATCH} msgs/request x{processes} process(es)",
                    items=BATCH_REQUESTS * BATCH)
    measured(bench, process, BATCH_REQUESTS * BATCH,
             f"produce, {BATCH} messages per request (per message), {processes} proxy process(es)",
             lambda: load(port, BATCH_REQUESTS, produce_batch))


def test_produce_direct_client(compare, setup):
    from fastmq.kafka import Producer

    count = BATCH_REQUESTS * BATCH

    def produce() -> None:
        # The proxy's own producer settings (acks=all, linger 0), one send per message.
        with Producer(setup["bootstrap"], acks="all") as producer:
            for _ in range(count):
                producer.send("bench-in", VALUE)
            producer.flush(120)
    bench = compare("proxy: produce 100 B messages", "direct fastmq Producer", items=count)
    cpu = time.process_time()
    started = time.perf_counter()
    bench.pedantic(produce, rounds=1, iterations=1)
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    print(f"\ndirect fastmq Producer: {count} in {elapsed:.2f} s ({count / elapsed:,.0f}/s wall clock); client CPU "
          f"{used / count * 1e6:,.2f} us each ({count / used if used else 0:,.0f}/s per fully used core)")


def piggy_backed(tokens: dict[int, str]) -> "callable":
    """Consume with the previous token acked by the next GET /message (ack=TOKEN): one request per message.
    `tokens` holds each connection's last token, which settle() acks when the load is over."""

    async def one(connection: HttpConnection) -> int:
        previous = tokens.pop(id(connection), None)
        status, body = await connection.request(
            "GET", "/message?consumer=bench-reader&max=1" + (f"&ack={previous}" if previous else ""))
        answer = orjson.loads(body) if status == 200 else {}
        if answer.get("token"):
            tokens[id(connection)] = answer["token"]
        return bool(answer.get("token")) and (previous is None or answer.get("ack") == "ok")
    return one


def settle(port: int, tokens: dict[int, str]) -> None:
    """Ack the tokens the connections of a piggy-backed load still hold (their queues stay locked otherwise)."""
    import http.client

    for token in tokens.values():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", "/ack", json.dumps({"consumer": "bench-reader", "token": token}),
                           {"content-type": "application/json"})
        assert connection.getresponse().status == 200
        connection.close()
    tokens.clear()


@pytest.mark.parametrize("processes, piggy_back", [(1, False), (2, False), (1, True)])
def test_consume_and_ack(compare, setup, request, processes, piggy_back):
    port, process = proxy_with(request, processes)
    tokens: dict[int, str] = {}
    one = piggy_backed(tokens) if piggy_back else consume_and_ack
    load(port, 200, one, CONSUMING_CONNECTIONS)
    settle(port, tokens)
    redis = setup["redis"]

    def script_calls() -> int:
        return redis.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    def redis_cpu() -> float:
        info = redis.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]
    before, cpu_before = script_calls(), redis_cpu()
    results = {}

    def run() -> None:
        results["acked"] = load(port, CONSUMED, one, CONSUMING_CONNECTIONS)
        settle(port, tokens)
    how = "ack piggy-backed on the next GET /message" if piggy_back else "GET /message max=1, POST /ack"
    bench = compare(f"proxy: consume+ack round trips ({how})", f"fastmq-proxy x{processes} process(es)",
                    items=CONSUMED)
    measured(bench, process, CONSUMED, f"consume+ack ({how}), {processes} proxy process(es)", run)
    acked = results["acked"]
    print(f"proxy x{processes} ({how}): {acked} of {CONSUMED} acked; Redis round trips per consumed message: "
          f"{(script_calls() - before) / max(acked, 1):.2f}, Redis CPU {(redis_cpu() - cpu_before) / CONSUMED * 1e6:.0f} "
          f"us each")
    assert acked >= CONSUMED - CONSUMING_CONNECTIONS      # piggy-backed: each connection's last token stays
