"""Peer NSQ clients against the embedded broker's nsqd: pynsq 0.9.1 (tornado) and gnsq 1.0.2 (gevent) publish,
consume with several connections, requeue, touch; what they publish reads through fastmq's client and back."""
from __future__ import annotations

import asyncio

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.nsq import Consumer, Producer
from tests.support.nsq import receive
from tests.support.waiting import wait_for

WAIT = 20.0


@pytest.fixture(scope="module")
def nsqd(pki):
    listener = ListenerConfig(protocol="nsq", ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key)
    with EmbeddedBroker(listeners=[listener], num_partitions=1) as broker:
        host, port = broker.addresses[0]
        yield f"{host}:{port}"


@pytest.mark.parametrize("features", ["plain", "snappy", "deflate", "tls"])
def test_pynsq_writer_and_reader(nsqd, pki, features):
    import nsq                  # pynsq and gnsq are in the test extras
    import tornado.ioloop

    options = {"plain": {}, "snappy": {"snappy": True}, "deflate": {"deflate": True},
               "tls": {"tls_v1": True, "tls_options": {"ca_certs": pki.ca_file}}}[features]
    topic = f"pynsq_{features}"
    # pynsq takes the thread's current loop: a test that ran asyncio.run() before left none to take
    asyncio.set_event_loop(asyncio.new_event_loop())
    loop = tornado.ioloop.IOLoop.current()
    answers = []
    writer = nsq.Writer([nsqd], **options)

    def publish():
        if not writer.conns:
            loop.call_later(0.01, publish)
            return
        writer.pub(topic, b"p1", lambda conn, data: answers.append(data))
        writer.mpub(topic, [b"p2", b"p3", b"requeue"], lambda conn, data: answers.append(data))
        writer.dpub(topic, 100, b"deferred", lambda conn, data: answers.append(data))

    seen = []

    def handler(message):
        seen.append((message.body, message.attempts))
        if message.body == b"requeue" and message.attempts == 1:
            message.touch()
            message.requeue(delay=0, backoff=False)
            return None
        return True

    readers = [nsq.Reader(topic=topic, channel="ch", message_handler=handler, nsqd_tcp_addresses=[nsqd],
                          max_in_flight=5, **options) for _ in range(2)]
    deadline = loop.time() + WAIT

    def check():
        if (len({body for body, _ in seen}) == 5 and (b"requeue", 2) in seen) or loop.time() > deadline:
            loop.stop()
        else:
            loop.call_later(0.02, check)

    loop.add_callback(publish)
    loop.add_callback(check)
    loop.start()
    for reader in readers:
        reader.close()
    for conn in list(writer.conns.values()):
        conn.close()
    loop.close(all_fds=True)
    asyncio.set_event_loop(None)
    assert answers == [b"OK", b"OK", b"OK"]
    assert sorted({body for body, _ in seen}) == [b"deferred", b"p1", b"p2", b"p3", b"requeue"]
    assert (b"requeue", 2) in seen


def test_gnsq_producer_and_consumer_with_ours(nsqd):
    import gnsq
    producer = gnsq.Producer([nsqd])
    producer.start()
    try:
        producer.publish("gnsq", b"g1")
        producer.multipublish("gnsq", [b"g2", b"g3"])
    finally:
        producer.close()
        producer.join()
    with Consumer("gnsq", "ours", nsqd_tcp_addresses=nsqd, max_in_flight=10) as consumer:
        assert sorted(message.body for message in receive(consumer, 3)) == [b"g1", b"g2", b"g3"]

    got = []
    gconsumer = gnsq.Consumer("gnsq", "theirs", nsqd_tcp_addresses=[nsqd], max_in_flight=4)

    @gconsumer.on_message.connect
    def handler(consumer, message):
        got.append(message.body)

    gconsumer.start(block=False)
    try:
        # A new channel gets what arrives after it exists, as on nsqd: publish once gnsq has subscribed.
        wait_for(lambda: (gnsq_wait(0.05), gconsumer.total_ready_count > 0)[1], timeout=WAIT,
                 message="gnsq subscribed")
        with Producer(nsqd) as ours:
            ours.publish_many("gnsq", [b"f%d" % i for i in range(10)]).result(WAIT)
        wait_for(lambda: (gnsq_wait(0.05), len(got) >= 10)[1], timeout=WAIT,
                 message=lambda: f"10 messages, got {got}")
    finally:
        gconsumer.close()
    assert sorted(got) == sorted(b"f%d" % i for i in range(10))


def gnsq_wait(seconds: float) -> None:
    import gevent

    gevent.sleep(seconds)


@pytest.mark.parametrize("features", ["plain", "snappy", "deflate", "tls"])
def test_nsqjs_writer_and_readers(nsqd, pki, features):
    # nsqjs (npm) in a small Node program: PUB, MPUB, DPUB; two readers on one channel; with "plain" also a requeue,
    # a message timed out by the broker, and one kept alive past its timeout by TOUCH.
    import json
    import os
    import subprocess
    from pathlib import Path

    from tests.support.nsq import nsqjs_modules

    options = {"plain": {}, "snappy": {"snappy": True}, "deflate": {"deflate": True},
               "tls": {"tls": True, "caFile": pki.ca_file}}[features]
    full = features == "plain"
    program = Path(__file__).with_name("nsqjs_peer.js")
    settings = {"nsqd": nsqd, "topic": f"nsqjs_{features}", "count": 20, "full": full, "options": options}
    done = subprocess.run(["node", str(program), json.dumps(settings)], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=40, env=dict(os.environ, NODE_PATH=str(nsqjs_modules())))
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    deliveries = [tuple(entry) for entry in json.loads(done.stdout.decode().splitlines()[-1])["deliveries"]]
    bodies = {body for body, _, _ in deliveries}
    assert bodies == {f"m{i}" for i in range(20)} | {"deferred"} | (
        {"requeue-me", "timeout-me", "touch-me"} if full else set())
    attempts = sorted((body, tries) for body, tries, _ in deliveries)
    if full:
        assert [a for a in attempts if a[0] in ("requeue-me", "timeout-me", "touch-me")] == [
            ("requeue-me", 1), ("requeue-me", 2), ("timeout-me", 1), ("timeout-me", 2), ("touch-me", 1)]
        assert {reader for _, _, reader in deliveries} == {0, 1}        # both readers took messages
    else:
        assert all(tries == 1 for _, tries in attempts)
