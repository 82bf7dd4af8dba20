"""fastmq.tubemq's Producer, PullConsumer and PushConsumer against the embedded TubeMQ master + broker: every row
of the seed's feature table that the embedded servers can show."""
from __future__ import annotations

import threading

import pytest

from fastmq.broker.config import ListenerConfig
from fastmq.broker.broker import EmbeddedBroker
from fastmq.errors import ConfigurationError, IllegalStateError, OperationTimeoutError
from fastmq.tubemq import (
    FROM_LATEST_OFFSET,
    ErrorCode,
    Message,
    NoMasterError,
    Producer,
    PullConsumer,
    PushConsumer,
    RpcClient,
)
from fastmq.tubemq.constants import INDEX_ENTRY_BYTES
from fastmq.tubemq.consumer import ConsumeResult
from fastmq.tubemq.errors import TubeMQError
from tests.support.waiting import wait_for

FAST = {"heartbeat_interval": 0.3, "empty_backoff": 0.05}


@pytest.fixture(scope="module")
def producer(tubemq):
    with Producer(tubemq.master, heartbeat_interval=0.5) as shared:
        yield shared


def drain(consumer: PullConsumer, count: int, timeout: float = 15.0, consumed: bool = True) -> list[Message]:
    """Read and confirm batches until `count` messages came (bounded by the deadline of wait_for)."""
    received: list[Message] = []

    def more() -> bool:
        try:
            result = consumer.get_message(timeout=0.5)
        except OperationTimeoutError:
            return False
        received.extend(result.messages)
        consumer.confirm(result, consumed)
        return len(received) >= count

    wait_for(more, timeout=timeout, message=lambda: f"{len(received)} of {count} messages arrived")
    return received


def test_round_trip_with_attributes_sync_and_async(tubemq, producer):
    producer.publish("cl-round")
    sent = producer.send(Message("cl-round", b"first", attributes={"k": "v"}, msg_type="t1", msg_time="202401021530"))
    assert sent.partition.topic == "cl-round"
    futures = [producer.send_async(Message("cl-round", b"async-%d" % i)) for i in range(50)]
    assert all(future.result(10).message_id >= 0 for future in futures)
    with PullConsumer(tubemq.master, "g-round", ["cl-round"], **FAST) as consumer:
        received = drain(consumer, 51)
    first = next(m for m in received if m.body == b"first")
    assert (first.attributes, first.msg_type, first.msg_time) == ({"k": "v"}, "t1", "202401021530")
    assert sorted(m.body for m in received if m.body != b"first") == sorted(b"async-%d" % i for i in range(50))


def test_partition_by_key_and_round_robin(producer):
    producer.publish("cl-keys")
    by_key = {producer.send(Message("cl-keys", b"x"), key="user-7").partition for _ in range(5)}
    assert len(by_key) == 1
    round_robin = {producer.send(Message("cl-keys", b"y")).partition.partition_id for _ in range(4)}
    assert round_robin == {0, 1, 2, 3}


def test_unknown_topic_and_bad_message(producer):
    with pytest.raises(ConfigurationError, match="publish"):
        producer.send(Message("cl-never-published", b"x"))
    with pytest.raises(ValueError):
        Message("cl-keys", b"x", attributes={"a,b": "c"}).encode()


def test_filters_several_topics_and_push(tubemq, producer):
    producer.publish("cl-multi-a", "cl-multi-b")
    for index in range(10):
        producer.send(Message("cl-multi-a", b"a%d" % index, msg_type="keep" if index % 2 else "skip"))
        producer.send(Message("cl-multi-b", b"b%d" % index))
    with PullConsumer(tubemq.master, "g-filter", {"cl-multi-a": ["keep"], "cl-multi-b": None}, **FAST) as consumer:
        received = drain(consumer, 15)
    assert sorted(m.body for m in received) == sorted([b"a%d" % i for i in range(1, 10, 2)] +
                                                      [b"b%d" % i for i in range(10)])
    pushed: list[bytes] = []
    lock = threading.Lock()

    def listener(messages):
        with lock:
            pushed.extend(m.body for m in messages)

    with PushConsumer(tubemq.master, "g-push", ["cl-multi-b"], listener, threads=2, **FAST):
        wait_for(lambda: len(pushed) >= 10, timeout=15, message="the push consumer got every message")
    assert sorted(pushed) == sorted(b"b%d" % i for i in range(10))


def test_manual_commit_rolls_back_what_was_not_processed(tubemq, producer):
    producer.publish("cl-manual")
    partition = producer.partitions("cl-manual")[0]
    for index in range(3):
        producer.send(Message("cl-manual", b"m%d" % index), key=b"same")
    with PullConsumer(tubemq.master, "g-manual", ["cl-manual"], **FAST) as consumer:
        first = wait_for(lambda: _one(consumer), timeout=15, message="a batch arrived")
        consumer.confirm(first, consumed=False)                     # processing failed: comes again
        again = wait_for(lambda: _one(consumer), timeout=15, message="the batch came again")
        assert [m.body for m in again.messages] == [m.body for m in first.messages]
        consumer.confirm(again, consumed=True)
        with pytest.raises(IllegalStateError):
            consumer.confirm(again)                                 # 1:1: a batch is confirmed once
    assert partition.key.endswith(":cl-manual:%d" % partition.partition_id)


def _one(consumer: PullConsumer) -> ConsumeResult | None:
    try:
        return consumer.get_message(timeout=0.5)
    except OperationTimeoutError:
        return None


def test_exact_offsets_and_consume_position(tubemq, producer):
    producer.publish("cl-offsets")
    partition = producer.partitions("cl-offsets")[2]
    sent = [producer.send(Message("cl-offsets", b"o%d" % index), key=_key_for(producer, "cl-offsets", 2))
            for index in range(6)]
    assert [result.append_offset for result in sent] == [index * INDEX_ENTRY_BYTES for index in range(6)]
    with PullConsumer(tubemq.master, "g-offsets", ["cl-offsets"], offsets={partition.key: sent[4].append_offset},
                      **FAST) as consumer:
        received = drain(consumer, 2)
    assert [m.body for m in received] == [b"o4", b"o5"]
    with PullConsumer(tubemq.master, "g-latest", ["cl-offsets"], consume_position=FROM_LATEST_OFFSET,
                      **FAST) as consumer:
        wait_for(lambda: len(consumer.partitions) == 4, timeout=15, message="partitions assigned")
        producer.send(Message("cl-offsets", b"after"))
        assert [m.body for m in drain(consumer, 1)] == [b"after"]


def _key_for(producer: Producer, topic: str, partition_id: int) -> bytes:
    """A key that lands on partition_id (the producer picks CRC32(key) % partitions)."""
    for index in range(1000):
        key = b"k%d" % index
        if producer._choose(topic, key).partition_id == partition_id:
            return key
    raise AssertionError("no key found")


def test_rebalancing_as_consumers_join_and_leave(tubemq, producer):
    producer.publish("cl-balance")
    shared = RpcClient()        # connection sharing: three consumers, one connection per server
    consumers = []
    try:
        for _ in range(3):
            consumers.append(PullConsumer(tubemq.master, "g-balance", ["cl-balance"], rpc_client=shared, **FAST))

            def settled() -> bool:
                held = [p.partition_id for c in consumers for p in c.partitions]
                owner = tubemq.front_end("master").groups["g-balance"].owner
                return sorted(held) == [0, 1, 2, 3] and len(owner) == 4 and all(c.partitions for c in consumers)
            wait_for(settled, timeout=20, message="every partition owned by exactly one consumer")
        consumers.pop(0).close()
        wait_for(settled, timeout=20, message="the leaver's partitions went to the others")
        assert len(shared.pool.nodes) == 2
    finally:
        for consumer in consumers:
            consumer.close()
        shared.close()


def test_master_failover_past_a_standby_and_a_dead_master(tubemq):
    standby = EmbeddedBroker(listeners=[ListenerConfig(protocol="tubemq-master")]).start()
    standby.broker.front_end("tubemq-master").standby = True
    host, port = standby.addresses[0]
    try:
        masters = f"127.0.0.1:1,{host}:{port},{tubemq.master}"       # nothing listens on port 1
        with Producer(masters, heartbeat_interval=0.5) as producer:
            producer.publish("cl-failover")
            assert producer.session.current == tuple(tubemq.embedded.addresses[0])
            assert producer.send(Message("cl-failover", b"x")).message_id >= 0
        with pytest.raises(NoMasterError, match="StandbyException"), Producer(f"{host}:{port}") as refused:
            refused.publish("cl-failover")
    finally:
        standby.close()


def test_broker_failure_blocking_and_recovery():
    from tests.support.tubemq import start_tubemq

    cluster = start_tubemq()
    try:
        with Producer(cluster.master, heartbeat_interval=0.3, bad_broker_threshold=2,
                      bad_broker_penalty=60) as producer:
            producer.publish("cl-recover")
            producer.send(Message("cl-recover", b"before"))
            cluster.embedded.broker.close()
            for _ in range(2):
                with pytest.raises(Exception):
                    producer.send(Message("cl-recover", b"lost"), timeout=10)
            assert producer.health.avoided(0) == {1}                  # the broker is blocked
            cluster.embedded.start()                                  # same ports, same data
            wait_for(lambda: _sends(producer), timeout=20, message="sending works again after the restart")
            with PullConsumer(cluster.master, "g-recover", ["cl-recover"], **FAST) as consumer:
                assert {m.body for m in drain(consumer, 2)} >= {b"before", b"after"}
    finally:
        cluster.embedded.close()


def _sends(producer: Producer) -> bool:
    try:
        producer.send(Message("cl-recover", b"after"), timeout=5)
        return True
    except Exception:
        return False


def test_errors_carry_tubemq_codes():
    from fastmq.tubemq import TubeMQError

    error = TubeMQError(410, "occupied")
    assert error.code is ErrorCode.PARTITION_OCCUPIED and "PARTITION_OCCUPIED" in str(error)
    assert TubeMQError(999, "new").code == 999


def test_a_consumer_the_master_forgot_registers_again(tubemq, producer):
    producer.publish("cl-forgot")
    with PullConsumer(tubemq.master, "g-forgot", ["cl-forgot"], **FAST) as consumer:
        wait_for(lambda: len(consumer.partitions) == 4, timeout=15, message="partitions assigned")
        master = tubemq.front_end("master")

        def forget() -> None:
            master._drop_consumer(master.groups["g-forgot"], consumer.client_id)
        tubemq.embedded.broker.loop.run_in_loop(forget, timeout=10)
        producer.send(Message("cl-forgot", b"after"))
        assert [m.body for m in drain(consumer, 1)] == [b"after"]     # HB_NO_NODE -> registered again
        assert consumer.client_id in master.groups["g-forgot"].consumers


def test_a_running_producer_moves_to_the_next_master_when_its_master_dies():
    from tests.support.tubemq import start_tubemq

    first, second = start_tubemq(partitions=2), start_tubemq(partitions=2)
    try:
        with Producer(f"{first.master},{second.master}", heartbeat_interval=0.2) as producer:
            producer.publish("cl-move")
            assert producer.send(Message("cl-move", b"one")).partition.broker.port == first.broker_address[1]
            first.embedded.close()

            def moved() -> bool:
                try:
                    return producer.send(Message("cl-move", b"two"), timeout=5).partition.broker.port == \
                        second.broker_address[1]
                except Exception:
                    return False
            wait_for(moved, timeout=20, message="the producer registered with the second master and sends there")
    finally:
        first.embedded.close()
        second.embedded.close()


def test_bound_consumption_waits_for_its_members_and_resets_offsets_once(tubemq, producer):
    """Bound consumption: two members of session "s1" name their partitions and start offsets; nothing is
    assigned before both are there; partition 3, named by both, goes to the bigger offset; a member that comes
    back after the first allocation starts from the committed offset, not from the offset it names."""
    topic, group = "cl-bound", "g-bound"
    producer.publish(topic)
    keys = {p.partition_id: p.key for p in producer.partitions(topic)}
    for partition_id in range(4):
        key = _key_for(producer, topic, partition_id)
        for index in range(5):
            producer.send(Message(topic, b"%d-%d" % (partition_id, index)), key=key)
    bound = {"session_key": "s1", "bound_consumers": 2, **FAST}
    at = INDEX_ENTRY_BYTES              # offsets count 28 bytes a message
    master = tubemq.front_end("master")
    with PullConsumer(tubemq.master, group, [topic], offsets={keys[0]: 3 * at, keys[3]: 1 * at},
                      **bound) as first:
        wait_for(lambda: group in master.groups, timeout=5, message="the first member registered")
        with pytest.raises(TubeMQError, match="another session"):
            PullConsumer(tubemq.master, group, [topic], offsets={keys[1]: 0}, session_key="s2", bound_consumers=2)
        threading.Event().wait(1.0)     # five balancing rounds: a bound group of one member of two gets nothing
        assert first.partitions == [] and master.groups[group].owner == {}
        with PullConsumer(tubemq.master, group, [topic], offsets={keys[1]: 4 * at, keys[3]: 2 * at},
                          **bound) as second:
            mine = sorted(m.body for m in drain(first, 2))
            theirs = sorted(m.body for m in drain(second, 4))
            assert (mine, theirs) == ([b"0-3", b"0-4"], [b"1-4", b"3-2", b"3-3", b"3-4"])
            assert sorted(p.partition_id for p in first.partitions) == [0]
            wait_for(lambda: master.groups[group].allocated, timeout=5, message="the first allocation reported")
        producer.send(Message(topic, b"3-5"), key=_key_for(producer, topic, 3))
        with PullConsumer(tubemq.master, group, [topic], offsets={keys[3]: 2 * at}, **bound) as again:
            assert [m.body for m in drain(again, 1)] == [b"3-5"]      # the committed offset, not 2


def test_standby_masters_share_state_through_a_failover():
    """Two master nodes on one state: node 0 active, node 1 standby. After fail_over(1) node 0 answers
    StandbyException; producer and consumer move to node 1 under their old ids, the consumer keeps its
    partitions (no rebalancing) and messages keep flowing."""
    cluster = EmbeddedBroker(listeners=[ListenerConfig(protocol="tubemq-master"),
                                        ListenerConfig(protocol="tubemq-master"),
                                        ListenerConfig(protocol="tubemq-broker")], num_partitions=4).start()
    try:
        master = cluster.broker.front_end("tubemq-master")
        nodes = [f"{host}:{port}" for host, port in master.addresses]
        with Producer(",".join(nodes), heartbeat_interval=0.2) as producer, \
                PullConsumer(",".join(nodes), "g-failover", ["cl-failover2"], **FAST) as consumer:
            producer.publish("cl-failover2")
            producer.send(Message("cl-failover2", b"before"))
            assert [m.body for m in drain(consumer, 1)] == [b"before"]
            wait_for(lambda: len(consumer.partitions) == 4, timeout=10, message="all four partitions registered")
            rebalance_id = master.groups["g-failover"].rebalance_id
            master.fail_over(1)
            wait_for(lambda: producer.session.current == tuple(master.addresses[1])
                     and consumer.session.current == tuple(master.addresses[1]), timeout=10,
                     message="producer and consumer moved to the new active master node")
            producer.send(Message("cl-failover2", b"after"))
            assert [m.body for m in drain(consumer, 1)] == [b"after"]
            assert sorted(p.partition_id for p in consumer.partitions) == [0, 1, 2, 3]
            assert master.groups["g-failover"].rebalance_id == rebalance_id
            assert list(master.groups["g-failover"].consumers) == [consumer.client_id]
            assert producer.client_id in master.producers
        with pytest.raises(ValueError):
            master.fail_over(2)
    finally:
        cluster.close()
