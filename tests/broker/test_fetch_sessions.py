"""Incremental fetch sessions (KIP-227) on the embedded broker, over the wire and with real consumers."""
from __future__ import annotations

import time
import uuid
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

from tests.support.waiting import WAIT
from .conftest import Wire, produce, record_batch, records_of, small_broker

F = kp.FetchRequest


def create_topic(wire: Wire, name: str, partitions: int) -> Any:
    request = kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)
    return wire.request(ApiKey.CREATE_TOPICS, 7, request).topics[0]


def session_fetch(wire: Wire, session_id: int, epoch: int, partitions: dict[tuple[str, int], int],
                  forget: dict[str, list[int]] | None = None, max_wait_ms: int = 0, version: int = 12,
                  max_bytes: int = 1 << 20) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in partitions.items():
        by_topic.setdefault(topic, []).append(F.FetchPartition(partition=partition, fetch_offset=offset,
                                                               partition_max_bytes=1 << 20))
    request = F(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
                session_epoch=epoch, topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in (forget or {}).items()],
                rack_id="")
    return wire.request(ApiKey.FETCH, version, request)


def answered(response: Any) -> dict[tuple[str, int], list[bytes]]:
    return {(t.topic, p.partition_index): [r.value for r in records_of(p)]
            for t in response.responses for p in t.partitions}


def test_a_session_answers_only_what_changed(broker):
    wire = Wire(broker.bootstrap_servers)
    topic = f"s-{uuid.uuid4().hex[:6]}"
    create_topic(wire, topic, 3)
    assert produce(wire, topic, 0, record_batch([b"a0"])).error_code == 0
    full = session_fetch(wire, 0, 0, {(topic, p): 0 for p in range(3)})
    assert full.error_code == 0 and full.session_id != 0
    assert answered(full) == {(topic, 0): [b"a0"], (topic, 1): [], (topic, 2): []}
    sid = full.session_id
    # Partition 0 moved on; nothing else changed: an empty answer.
    nothing = session_fetch(wire, sid, 1, {(topic, 0): 1})
    assert (nothing.error_code, nothing.session_id, answered(nothing)) == (0, sid, {})
    # New records on partition 2 come without asking for it again; the others stay out.
    assert produce(wire, topic, 2, record_batch([b"c0", b"c1"])).error_code == 0
    assert answered(session_fetch(wire, sid, 2, {})) == {(topic, 2): [b"c0", b"c1"]}
    # Having read them, the consumer moves partition 2 on: its new high watermark was told already.
    assert answered(session_fetch(wire, sid, 3, {(topic, 2): 2})) == {}
    # A forgotten partition is not read any more.
    assert answered(session_fetch(wire, sid, 4, {}, forget={topic: [1]})) == {}
    assert produce(wire, topic, 1, record_batch([b"b0"])).error_code == 0
    assert answered(session_fetch(wire, sid, 5, {})) == {}
    # An out-of-range offset is answered at once, with its error.
    error = session_fetch(wire, sid, 6, {(topic, 0): 99})
    assert [p.error_code for t in error.responses for p in t.partitions] == [kerrors.OffsetOutOfRangeError.errno]
    wire.close()


def test_a_full_answer_does_not_leave_out_the_same_partitions_every_time(broker):
    """Each answer holds one record (max_bytes 1: the first partition with data gets its first record, KIP-74, and
    then the answer is full). Partition 0 always has more, and comes first in the session: were the session's order
    kept, it alone would be answered until it ran dry. Partitions an answer held go to the end of the order."""
    wire = Wire(broker.bootstrap_servers)
    topic = f"s-{uuid.uuid4().hex[:6]}"
    create_topic(wire, topic, 3)
    for partition in range(3):
        for i in range(3):
            assert produce(wire, topic, partition, record_batch([b"%d" % i * 1000])).error_code == 0
    offsets = {(topic, p): 0 for p in range(3)}
    answer = session_fetch(wire, 0, 0, offsets, max_bytes=1)
    sid, served = answer.session_id, []
    for epoch in range(1, 5):
        held = {key: values for key, values in answered(answer).items() if values}
        assert len(held) == 1 and len(next(iter(held.values()))) == 1, held
        key = next(iter(held))
        served.append(key[1])
        offsets[key] += 1
        answer = session_fetch(wire, sid, epoch, {key: offsets[key]}, max_bytes=1)
    assert served == [0, 0, 1, 2]
    wire.close()


def test_session_errors_and_closing(broker):
    wire = Wire(broker.bootstrap_servers)
    topic = f"s-{uuid.uuid4().hex[:6]}"
    create_topic(wire, topic, 1)
    sid = session_fetch(wire, 0, 0, {(topic, 0): 0}).session_id
    assert session_fetch(wire, sid, 5, {}).error_code == kerrors.InvalidFetchSessionEpochError.errno
    assert session_fetch(wire, sid + 1 if sid < 2 ** 31 - 1 else 1, 1, {}).error_code == \
        kerrors.FetchSessionIdNotFoundError.errno
    assert session_fetch(wire, sid, 1, {}).error_code == 0           # the right epoch still works
    # The final epoch closes it, and is a full fetch without a session.
    final = session_fetch(wire, sid, -1, {(topic, 0): 0})
    assert (final.error_code, final.session_id) == (0, 0) and (topic, 0) in answered(final)
    assert session_fetch(wire, sid, 2, {}).error_code == kerrors.FetchSessionIdNotFoundError.errno
    # Sessionless full fetches never create one.
    assert session_fetch(wire, 0, -1, {(topic, 0): 0}).session_id == 0
    wire.close()


def test_a_held_incremental_fetch_is_answered_by_new_records(broker):
    wire, producer = Wire(broker.bootstrap_servers), Wire(broker.bootstrap_servers)
    topic = f"s-{uuid.uuid4().hex[:6]}"
    create_topic(wire, topic, 2)
    sid = session_fetch(wire, 0, 0, {(topic, 0): 0, (topic, 1): 0}).session_id
    started = time.monotonic()
    correlation_id = wire.send(ApiKey.FETCH, 12, F(
        max_wait_ms=int(WAIT * 1000), min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=sid,
        session_epoch=1, topics=[], forgotten_topics_data=[], rack_id=""))
    time.sleep(0.2)  # the fetch is parked, waiting for data, when the record comes
    assert produce(producer, topic, 1, record_batch([b"late"])).error_code == 0
    response = wire.receive(ApiKey.FETCH, 12, correlation_id)
    assert time.monotonic() - started < WAIT / 2
    assert answered(response) == {(topic, 1): [b"late"]}
    wire.close()
    producer.close()


def test_a_full_cache_goes_on_without_sessions(tmp_path):
    with small_broker(tmp_path / "data", fetch_max_sessions=1) as embedded:
        wire = Wire(embedded.bootstrap_servers)
        topic = f"s-{uuid.uuid4().hex[:6]}"
        create_topic(wire, topic, 1)
        assert session_fetch(wire, 0, 0, {(topic, 0): 0}).session_id != 0
        refused = session_fetch(wire, 0, 0, {(topic, 0): 0})
        assert (refused.error_code, refused.session_id) == (0, 0) and (topic, 0) in answered(refused)
        wire.close()


def test_sessions_by_topic_id(broker):
    wire = Wire(broker.bootstrap_servers)
    topic = f"s-{uuid.uuid4().hex[:6]}"
    topic_id = create_topic(wire, topic, 2).topic_id
    assert topic_id.int != 0
    request = F(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=0,
                topics=[F.FetchTopic(topic_id=topic_id, partitions=[
                    F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (0, 1)])],
                forgotten_topics_data=[], rack_id="")
    full = wire.request(ApiKey.FETCH, 13, request)
    assert [(t.topic_id, len(t.partitions)) for t in full.responses] == [(topic_id, 2)]
    forget = F(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=full.session_id,
               session_epoch=1, topics=[], forgotten_topics_data=[F.ForgottenTopic(topic_id=topic_id, partitions=[0])],
               rack_id="")
    assert wire.request(ApiKey.FETCH, 13, forget).error_code == 0
    assert produce(wire, topic, 0, record_batch([b"x"])).error_code == 0
    assert produce(wire, topic, 1, record_batch([b"y"])).error_code == 0
    again = F(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=full.session_id,
              session_epoch=2, topics=[], forgotten_topics_data=[], rack_id="")
    response = wire.request(ApiKey.FETCH, 13, again)
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in response.responses] == [(topic_id, [1])]
    wire.close()


def test_consumers_use_sessions_across_many_partitions(broker):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as PeerTopicPartition

    from fastmq.kafka import Consumer, Producer, TopicPartition

    topic = f"many-{uuid.uuid4().hex[:6]}"
    wire = Wire(broker.bootstrap_servers)
    create_topic(wire, topic, 16)
    wire.close()
    with Producer(broker.bootstrap_servers, linger_ms=2) as producer:
        for round_ in range(3):
            for partition in range(16):
                producer.send(topic, b"%d-%d" % (partition, round_), partition=partition)
        producer.flush(WAIT)
    expected = sorted(b"%d-%d" % (p, r) for p in range(16) for r in range(3))
    before = len(broker.broker.front_end("kafka").fetch_sessions)
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(16)])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(expected) and time.monotonic() < deadline:
            got += [r.value for r in consumer.consume(100, 0.5)]
        assert sorted(got) == expected
        assert len(broker.broker.front_end("kafka").fetch_sessions) > before
    peer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                         enable_auto_commit=False)
    peer.assign([PeerTopicPartition(topic, p) for p in range(16)])
    got = []
    deadline = time.monotonic() + WAIT
    while len(got) < len(expected) and time.monotonic() < deadline:
        for records in peer.poll(500).values():
            got += [r.value for r in records]
    peer.close()
    assert sorted(got) == expected
