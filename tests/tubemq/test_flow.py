"""TubeMQ flow-control rules (fastmq.tubemq.flow): the JSON parsed, group rules over the default ones, garbage
rejected cleanly; the embedded master hands them to consumers by check id and fastmq's consumer obeys them."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import OperationTimeoutError, ProtocolError
from fastmq.tubemq import Message, Producer, PullConsumer, RpcClient, rpc
from fastmq.tubemq.flow import MB, DataLimit, FlowRules, PullFrequency
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST

SAMPLE = json.dumps([
    {"type": 0, "rule": [{"start": "08:00", "end": "17:59", "dltInM": 1024, "limitInM": 20, "freqInMs": 1000}]},
    {"type": 2, "rule": [{"start": "18:00", "end": "23:59", "dltStInM": 20480, "dltEdInM": 2048}]},
    {"type": 1, "rule": [{"zeroCnt": 8, "freqInMs": 1000}, {"zeroCnt": 3, "freqInMs": 300}]},
    {"type": 3, "rule": [{"normFreqInMs": 0, "filterFreqInMs": 100, "minDataFilterFreqInMs": 400}]}])


def test_the_documented_rules():
    rules = FlowRules.parse(SAMPLE)
    assert rules.data_limits == (DataLimit(8 * 60, 17 * 60 + 59, 1024 * MB, 20 * MB, 1.0),)
    assert [rules.empty_rest(n) for n in (2, 3, 7, 8, 50)] == [None, 0.3, 0.3, 1.0, 1.0]
    assert rules.frequency == PullFrequency(0.0, 0.1, 0.4)
    assert [rules.pull_interval(f, e) for f, e in ((False, True), (True, False), (True, True))] == [0.0, 0.1, 0.4]
    assert rules.data_limit(9 * 60, 2048 * MB) is not None
    assert rules.data_limit(9 * 60, 10 * MB) is None and rules.data_limit(20 * 60, 2048 * MB) is None
    group = FlowRules.parse(json.dumps([{"type": 1, "rule": [{"zeroCnt": 1, "freqInMs": 50}]}]))
    merged = group.over(rules)
    assert merged.empty_rest(1) == 0.05 and merged.frequency == rules.frequency
    assert FlowRules.parse("") == FlowRules() and FlowRules.parse(None).empty_rest(100) is None


@pytest.mark.parametrize("text", ["{", "{}", '[{"type": 9, "rule": []}]', '[{"type": 1, "rule": [{"zeroCnt": -1, '
                                  '"freqInMs": 5}]}]', '[{"type": 0, "rule": [{"start": "25:00", "end": "1:00", '
                                  '"dltInM": 1, "limitInM": 1, "freqInMs": 1}]}]', '[{"type": 1, "rule": {}}]',
                                  '[{"type": true, "rule": []}]'])
def test_malformed_rules_are_refused(text):
    with pytest.raises(ProtocolError):
        FlowRules.parse(text)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "rule", "zeroCnt", "freqInMs", "start", "end", "dltInM",
                                         "limitInM", "normFreqInMs", "filterFreqInMs", "minDataFilterFreqInMs"]),
                        inner, max_size=5), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.one_of(JSON.map(json.dumps), st.text(max_size=30)))
def test_rule_parser_rejects_garbage_cleanly(text):
    try:
        FlowRules.parse(text)
    except ProtocolError:
        pass


class CountingRpc(RpcClient):
    """fastmq's RPC client, counting the getMessage requests it sends."""

    pulls = 0

    def call(self, address, method, request, response_class, *args, **kwargs):
        if method == rpc.GET_MESSAGE:
            self.pulls += 1
        return super().call(address, method, request, response_class, *args, **kwargs)


@pytest.fixture
def producer(tubemq):
    with Producer(tubemq.master, heartbeat_interval=0.5) as shared:
        yield shared


@pytest.fixture
def flow_master(tubemq):
    master = tubemq.front_end("master")
    yield master
    master.set_flow_rules("")
    master.flow_rules.clear()


def test_the_master_hands_out_rules_and_the_consumer_pulls_as_they_say(tubemq, flow_master):
    """Only upper bounds on how often the consumer pulls are asserted: a loaded machine can only pull less.
    Without rules this consumer pulls an empty partition every 0.05 s."""
    with pytest.raises(ProtocolError):
        flow_master.set_flow_rules("[{", group="g-flow")
    flow_master.set_flow_rules(json.dumps([{"type": 3, "rule": [{"normFreqInMs": 500, "filterFreqInMs": 500,
                                                                   "minDataFilterFreqInMs": 500}]}]))
    flow_master.set_flow_rules(json.dumps([{"type": 1, "rule": [{"zeroCnt": 2, "freqInMs": 1000}]}]),
                               group="g-flow")
    counting = CountingRpc()
    try:
        with PullConsumer(tubemq.master, "g-flow", ["cl-flow-empty"], rpc_client=counting, **FAST) as consumer:
            wait_for(lambda: consumer.flow.frequency and consumer.flow.empty_rests, timeout=10,
                     message="the consumer got the default and the group's rules")
            assert consumer.flow.frequency.normal == 0.5 and consumer.flow.empty_rest(2) == 1.0
            wait_for(lambda: len(consumer.partitions) == 4, timeout=10, message="partitions assigned")
            counting.pulls = 0
            with pytest.raises(OperationTimeoutError):
                consumer.get_message(timeout=2.0)
            # per partition: a pull at once, one 0.5 s later (the second empty one in a row), then 1 s of rest
            assert counting.pulls <= 4 * 3
            checked = consumer._flow_ids
            flow_master.set_flow_rules("", group="g-flow")
            wait_for(lambda: consumer._flow_ids != checked and not consumer.flow.empty_rests, timeout=10,
                     message="the group's rules cleared")
    finally:
        counting.close()


def test_a_data_limit_rests_a_partition_after_each_batch(tubemq, producer, flow_master):
    """A group data limit of 0 MB a minute while lagging 0 MB or more, all day: a partition rests 1 s after each
    batch. Without it, a consumer reading while a producer writes gets a batch nearly every round."""
    flow_master.set_flow_rules(json.dumps([{"type": 0, "rule": [{"start": "00:00", "end": "23:59", "dltInM": 0,
                                                                   "limitInM": 0, "freqInMs": 1000}]}]),
                               group="g-flow-data")
    producer.publish("cl-flow-data")
    with PullConsumer(tubemq.master, "g-flow-data", ["cl-flow-data"], **FAST) as consumer:
        wait_for(lambda: consumer.flow.data_limits and len(consumer.partitions) == 4, timeout=10,
                 message="rules and partitions")
        batches, deadline = 0, time.monotonic() + 1.5
        for index in range(200):
            if time.monotonic() >= deadline:
                break
            producer.send(Message("cl-flow-data", b"d%d" % index), key=b"one")     # one partition
            try:
                result = consumer.get_message(timeout=0.05)
            except OperationTimeoutError:
                continue
            consumer.confirm(result)
            batches += 1
        assert 1 <= batches <= 2
