"""Valid TubeMQ RPC frames whose request messages carry random field values, against the embedded broker's TubeMQ
master and broker: every request is answered (a response or an exception reply) or closes that one connection, no
method's handler fails (the service logs such a failure with its traceback, which fails these tests) and the
broker keeps serving a real client afterwards."""
from __future__ import annotations

import socket

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native.frames import TubeMQFrameSplitter
from fastmq.tubemq import Message, Producer, rpc
from fastmq.tubemq._proto import broker_pb2, master_pb2
from tests.support.tubemq import start_tubemq

MASTER_METHODS = {
    rpc.PRODUCER_REGISTER: master_pb2.RegisterRequestP2M, rpc.PRODUCER_HEARTBEAT: master_pb2.HeartRequestP2M,
    rpc.PRODUCER_CLOSE: master_pb2.CloseRequestP2M, rpc.CONSUMER_REGISTER: master_pb2.RegisterRequestC2M,
    rpc.CONSUMER_HEARTBEAT: master_pb2.HeartRequestC2M, rpc.CONSUMER_CLOSE: master_pb2.CloseRequestC2M,
}
BROKER_METHODS = {
    rpc.SEND_MESSAGE: broker_pb2.SendMessageRequestP2B, rpc.CONSUMER_REGISTER_TO_BROKER: broker_pb2.RegisterRequestC2B,
    rpc.CONSUMER_HEARTBEAT_TO_BROKER: broker_pb2.HeartBeatRequestC2B, rpc.GET_MESSAGE: broker_pb2.GetMessageRequestC2B,
    rpc.COMMIT_OFFSET: broker_pb2.CommitOffsetRequestC2B,
}
# Strings that look like TubeMQ's own (topics, "id:host:port" broker infos, "topic#partition" keys, filters) mixed
# with any text, so that the handlers' parsers see near misses as well as noise.
TEXTS = st.one_of(st.sampled_from(["fuzz", "fuzz-group", "1:127.0.0.1:8123", "1:127.0.0.1:8123:fuzz:0",
                                   "fuzz#0", "fuzz#a", "1:x:y", "fuzz:1:2", "", "a,b", "fuzz@1,2"]),
                  st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WAIT = 5.0


def field_values(field: FieldDescriptor, depth: int) -> st.SearchStrategy:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        single: st.SearchStrategy = messages(field.message_type._concrete_class, depth + 1)
    elif field.type == FieldDescriptor.TYPE_STRING:
        single = TEXTS
    elif field.type == FieldDescriptor.TYPE_BYTES:
        single = st.binary(max_size=64)
    elif field.type == FieldDescriptor.TYPE_BOOL:
        single = st.booleans()
    elif field.type in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32,
                        FieldDescriptor.TYPE_ENUM):
        single = st.one_of(st.integers(-3, 40), st.integers(-2**31, 2**31 - 1))
    elif field.type in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        single = st.integers(0, 2**32 - 1)
    elif field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        single = st.integers(0, 2**64 - 1)
    elif field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        single = st.floats(allow_nan=False, width=32)
    else:
        single = st.one_of(st.integers(-3, 1 << 20), st.integers(-2**63, 2**63 - 1))
    if field.is_repeated:
        return st.lists(single, max_size=3)
    return single


def messages(message_class: type, depth: int = 0) -> st.SearchStrategy:
    """Messages of message_class with any subset of their fields set to random values (nesting bounded)."""
    fields = [f for f in message_class.DESCRIPTOR.fields if depth < 2 or f.type != FieldDescriptor.TYPE_MESSAGE]
    return st.fixed_dictionaries({}, optional={f.name: field_values(f, depth) for f in fields}).map(
        lambda values: message_class(**values))


@pytest.fixture(scope="module")
def tubemq():
    cluster = start_tubemq(partitions=2)
    yield cluster
    cluster.embedded.close()


def exchange(address: tuple[str, int], frame: bytes) -> bool:
    """Sends one request frame; True when a whole frame came back, False when the server closed first."""
    with socket.create_connection(address, timeout=WAIT) as sock:
        sock.sendall(frame)
        splitter = TubeMQFrameSplitter()
        for _ in range(64):                      # a reply is a few KiB at most: a bound on the reads
            data = sock.recv(65536)
            if not data:
                return False
            splitter.feed(data)
            if splitter.next_frame() is not None:
                return True
    raise AssertionError("no whole reply frame after 64 reads")


def one_request(method: int, message_class: type) -> st.SearchStrategy:
    return st.tuples(st.just(method), messages(message_class))


@FUZZ
@given(st.one_of(*(one_request(method, cls) for method, cls in MASTER_METHODS.items())))
def test_master_methods_with_random_fields(tubemq, no_handler_failures, request_):
    method, message = request_
    host, port = tubemq.master.split(":")
    exchange((host, int(port)), rpc.encode_request(7, method, message.SerializePartialToString()))


@FUZZ
@given(st.one_of(*(one_request(method, cls) for method, cls in BROKER_METHODS.items())))
def test_broker_methods_with_random_fields(tubemq, no_handler_failures, request_):
    method, message = request_
    exchange(tubemq.broker_address, rpc.encode_request(7, method, message.SerializePartialToString()))


def test_a_real_client_is_served_after_the_fuzz(tubemq):
    with Producer(tubemq.master) as producer:
        producer.publish("fuzz-after")
        assert producer.send(Message("fuzz-after", b"still served")) is not None
