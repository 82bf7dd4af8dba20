"""fastmq.nsq's Producer and Consumer against the real nsqd and nsqlookupd v1.3.0 (one pair for the session)."""
from __future__ import annotations

import pytest

from fastmq.io.tls import create_client_context
from fastmq.nsq import Consumer, NSQConfigurationError, NSQServerError, Producer
from tests.nsq.conftest import SCANNED_CHANNEL, SCANNED_TOPIC
from tests.support.nsq import receive
from tests.support.servers import free_port
from tests.support.waiting import wait_for

WAIT = 20.0


def test_publish_and_consume_through_lookupd(nsq, topic):
    with Producer(nsq.nsqd.tcp_address) as producer:
        futures = [producer.publish(topic, b"m%d" % i) for i in range(200)]
        futures.append(producer.publish_many(topic, [b"batch-a", b"batch-b"]))
        for future in futures:
            assert future.result(WAIT) is None
    with Consumer(topic, "ch", lookupd_http_addresses=nsq.lookupd.http_address, max_in_flight=50) as consumer:
        bodies = sorted(message.body for message in receive(consumer, 202))
    assert bodies == sorted([b"m%d" % i for i in range(200)] + [b"batch-a", b"batch-b"])
    wait_for(lambda: nsq.nsqd.topic_depth(topic, "ch") == (0, 0), timeout=WAIT,
             message="every message finished at nsqd")


def test_several_connections_per_nsqd(nsq, topic):
    """connections_per_nsqd: the chunks of a topic without partitions leave through every connection, pipelined,
    and flush() waits for the answers of all of them."""
    nsq.nsqd.create_topic(topic, "ch")
    with Producer(nsq.nsqd.tcp_address, connections_per_nsqd=3, max_batch_messages=10,
                  requests_in_flight=2) as producer:
        futures = [producer.publish_many(topic, [b"%d-%d" % (chunk, i) for i in range(10)]) for chunk in range(60)]
        producer.flush(WAIT)
        assert all(future.done() and future.exception() is None for future in futures)
        connected = producer.loop.run_in_loop(
            lambda: sorted(node for node in producer.pool.nodes if producer.pool.connection(node) is not None),
            timeout=WAIT)
    assert len(connected) == 3
    producer.flush()                    # closed: nothing is left to wait for
    assert nsq.nsqd.topic_depth(topic, "ch") == (600, 0)
    with pytest.raises(NSQConfigurationError, match="connections_per_nsqd"):
        Producer(nsq.nsqd.tcp_address, connections_per_nsqd=0)


def test_requeue_redelivers_with_attempts_and_give_up(nsq, topic):
    given_up = []
    with Producer(nsq.nsqd.tcp_address) as producer:
        producer.publish(topic, b"poison").result(WAIT)
    with Consumer(topic, "ch", nsqd_tcp_addresses=nsq.nsqd.tcp_address, max_attempts=2, backoff_ms=10,
                  on_give_up=given_up.append) as consumer:
        first = receive(consumer, 1, finish=False)[0]
        assert first.attempts == 1
        first.requeue(0)
        second = receive(consumer, 1, finish=False)[0]
        assert (second.id, second.attempts) == (first.id, 2)
        second.touch()
        second.requeue(0, backoff=False)
        wait_for(lambda: consumer.poll(0.2) is None and given_up, timeout=WAIT, message="the give-up hook ran")
    assert [(message.id, message.attempts) for message in given_up] == [(first.id, 3)]
    wait_for(lambda: nsq.nsqd.topic_depth(topic, "ch") == (0, 0), timeout=WAIT, message="given up = finished")


def test_max_in_flight_is_the_rdy_of_one_connection(nsq, topic):
    with Producer(nsq.nsqd.tcp_address) as producer:
        producer.publish_many(topic, [b"x"] * 20).result(WAIT)
    with Consumer(topic, "ch", nsqd_tcp_addresses=nsq.nsqd.tcp_address, max_in_flight=7) as consumer:
        held = receive(consumer, 7, finish=False)
        wait_for(lambda: nsq.nsqd.topic_depth(topic, "ch") == (13, 7), timeout=WAIT,
                 message=lambda: f"7 in flight, 13 waiting: {nsq.nsqd.topic_depth(topic, 'ch')}")
        assert consumer.poll(0.3) is None        # no eighth message while seven are unanswered
        for message in held:
            message.finish()
        receive(consumer, 13)


def test_server_errors_and_bad_arguments(nsq, topic):
    with Producer(nsq.nsqd.tcp_address) as producer:
        with pytest.raises(NSQConfigurationError):
            producer.publish("bad topic", b"x")
        with pytest.raises(NSQConfigurationError, match="E_BAD_MESSAGE"):
            producer.publish(topic, b"").result(WAIT)       # nsqd refuses empty messages: not even sent
        with pytest.raises(NSQServerError, match="E_BAD_MESSAGE"):
            producer.publish(topic, b"x" * (1024 * 1024 + 1)).result(WAIT)    # over nsqd's --max-msg-size
        assert producer.publish(topic, b"after").result(WAIT) is None   # a new connection serves on


def test_producer_through_lookupd_and_deferred_publish(nsq):
    topic = SCANNED_TOPIC
    with Producer(lookupd_http_addresses=nsq.lookupd.http_address) as producer, \
            Consumer(topic, SCANNED_CHANNEL, nsqd_tcp_addresses=nsq.nsqd.tcp_address, max_in_flight=5) as consumer:
        producer.publish(topic, b"later", defer_ms=300).result(WAIT)
        producer.publish(topic, b"now").result(WAIT)
        bodies = [message.body for message in receive(consumer, 2)]
    assert bodies == [b"now", b"later"]
    # A slow consumer: nsqd takes back what is not answered within the connection's msg_timeout, and sends it again.
    with Producer(nsq.nsqd.tcp_address) as producer, \
            Consumer(topic, SCANNED_CHANNEL, nsqd_tcp_addresses=nsq.nsqd.tcp_address, msg_timeout_ms=1000) as slow:
        producer.publish(topic, b"slow").result(WAIT)
        first = receive(slow, 1, finish=False)[0]
        again = receive(slow, 1, finish=False)[0]
        assert (again.id, again.attempts) == (first.id, 2)
        again.finish()


@pytest.mark.parametrize("features", [
    {"snappy": True}, {"deflate": True, "deflate_level": 3}, {"tls": "tls"}, {"tls": "tls", "snappy": True},
], ids=["snappy", "deflate", "tls", "tls+snappy"])
def test_negotiated_features_carry_messages(nsq, topic, pki, features):
    options = dict(features)
    if options.get("tls"):
        options["tls"] = create_client_context(ssl_cafile=pki.ca_file)
    bodies = [bytes([i % 251]) * (i * 37 % 3000 + 1) for i in range(300)]
    with Producer(nsq.nsqd.tcp_address, **options) as producer:
        producer.publish_many(topic, bodies[:150]).result(WAIT)
        for future in [producer.publish(topic, body) for body in bodies[150:]]:
            future.result(WAIT)
        negotiated = producer.pool.loop.run_in_loop(
            lambda: producer.pool.connection(producer.pool.nodes[0]).adapter.negotiated, timeout=WAIT)
    assert all(negotiated.get(key if key != "tls" else "tls_v1") for key in features if key != "deflate_level")
    with Consumer(topic, "ch", nsqd_tcp_addresses=nsq.nsqd.tcp_address, max_in_flight=100, **options) as consumer:
        got = sorted(message.body for message in receive(consumer, 300))
    assert got == sorted(bodies)


def test_heartbeats_are_answered(nsq, topic):
    # nsqd closes a connection that does not answer two heartbeats: with 1 s heartbeats the connection made
    # before 2.5 idle seconds still delivers.
    with Consumer(topic, "ch", nsqd_tcp_addresses=nsq.nsqd.tcp_address, heartbeat_interval_ms=1000) as consumer:
        wait_for(lambda: consumer.connections == 1, timeout=WAIT, message="subscribed")
        assert consumer.poll(2.5) is None
        first = consumer.pool.loop.run_in_loop(lambda: consumer.pool.connection(consumer.pool.nodes[0]))
        with Producer(nsq.nsqd.tcp_address) as producer:
            producer.publish(topic, b"still here").result(WAIT)
        assert receive(consumer, 1)[0].body == b"still here"
        assert consumer.pool.loop.run_in_loop(lambda: consumer.pool.connection(consumer.pool.nodes[0])) is first


def test_nsqd_restart_under_a_consumer_redelivers_in_flight_messages(nsq, topic):
    with Producer(nsq.nsqd.tcp_address) as producer:
        producer.publish_many(topic, [b"r%d" % i for i in range(50)]).result(WAIT)
    seen: set[bytes] = set()
    with Consumer(topic, "ch", nsqd_tcp_addresses=nsq.nsqd.tcp_address, max_in_flight=10) as consumer:
        held = receive(consumer, 10, finish=False)      # in flight when nsqd goes away: never finished
        seen.update(message.body for message in held)
        nsq.nsqd.stop()
        nsq.nsqd.start()
        for message in held:
            message.finish()                          # their connection is gone: these answers are dropped

        def all_seen() -> bool:
            message = consumer.poll(0.2)
            if message is not None:
                seen.add(message.body)
                message.finish()
            # nsqd kept the 10 unanswered ones through its restart: they come again, and are finished then.
            return len(seen) == 50 and message is None and nsq.nsqd.topic_depth(topic, "ch") == (0, 0)

        wait_for(all_seen, timeout=30, interval=0,
                 message=lambda: f"50 distinct messages, all finished; saw {len(seen)}")


def test_a_failing_lookupd_is_asked_last(nsq, topic):
    from fastmq.nsq.lookup import Lookupd, NSQLookupError

    nsq.nsqd.create_topic(topic)
    dead = f"127.0.0.1:{free_port()}"
    lookupd = Lookupd([dead, nsq.lookupd.http_address], timeout=2.0)
    answer = lookupd.lookup(topic, access="r", metainfo=True)
    assert [(a.host, a.tcp_port) for a in answer.addresses] == [("127.0.0.1", nsq.nsqd.tcp_port)]
    assert not answer.partitioned
    assert lookupd.addresses == [nsq.lookupd.http_address, dead]
    assert lookupd.lookup("no_such_topic_here").addresses == []
    # each lookupd is asked 1 + retries times before the next one
    with pytest.raises(NSQLookupError) as failed:
        Lookupd([dead], timeout=2.0, retries=2).lookup(topic)
    assert str(failed.value).count(dead) == 3
