"""The embedded broker's TubeMQ master + broker, driven through raw RPC: registration and metadata, a balancing
event in a heartbeat, PARTITION_OCCUPIED, getMessage booking (confirm and roll back), filters, bad checksums,
unknown clients, a standby master."""
from __future__ import annotations

import pytest

from fastmq.tubemq import rpc
from fastmq.tubemq._proto import broker_pb2, master_pb2
from fastmq.tubemq.constants import INDEX_ENTRY_BYTES
from fastmq.tubemq.errors import ErrorCode, StandbyError
from fastmq.tubemq.message import Message, checksum
from fastmq.tubemq.rpc_client import RpcClient
from tests.support.waiting import wait_for


@pytest.fixture
def client():
    rpc_client = RpcClient()
    yield rpc_client
    rpc_client.close()


def master_address(tubemq):
    host, port = tubemq.master.split(":")
    return host, int(port)


def send(client, tubemq, topic, partition, body, msg_type=None, check=None):
    data, flag = Message(topic, body, msg_type=msg_type).encode()
    return client.call(tubemq.broker_address, rpc.SEND_MESSAGE, broker_pb2.SendMessageRequestP2B(
        clientId="raw", topicName=topic, partitionId=partition, data=data, flag=flag,
        checkSum=checksum(data) if check is None else check, sentAddr=0, msgType=msg_type),
        broker_pb2.SendMessageResponseB2P)


def register(client, tubemq, consumer, group, topic, partition, op_type=31, filters=()):
    return client.call(tubemq.broker_address, rpc.CONSUMER_REGISTER_TO_BROKER, broker_pb2.RegisterRequestC2B(
        opType=op_type, clientId=consumer, groupName=group, topicName=topic, partitionId=partition, readStatus=-1,
        filterCondStr=list(filters)), broker_pb2.RegisterResponseB2C)


def get(client, tubemq, consumer, group, topic, partition, consumed=False):
    return client.call(tubemq.broker_address, rpc.GET_MESSAGE, broker_pb2.GetMessageRequestC2B(
        clientId=consumer, groupName=group, topicName=topic, partitionId=partition, lastPackConsumed=consumed),
        broker_pb2.GetMessageResponseB2C)


def test_producer_metadata(client, tubemq):
    master = master_address(tubemq)
    registered = client.call(master, rpc.PRODUCER_REGISTER, master_pb2.RegisterRequestP2M(
        clientId="p-meta", topicList=["fe-meta"], brokerCheckSum=-1, hostName="127.0.0.1"),
        master_pb2.RegisterResponseM2P)
    host, port = tubemq.broker_address
    assert registered.success and list(registered.brokerInfos) == [f"1:{host}:{port}"]
    heartbeat = client.call(master, rpc.PRODUCER_HEARTBEAT, master_pb2.HeartRequestP2M(
        clientId="p-meta", topicList=["fe-meta"], brokerCheckSum=registered.brokerCheckSum, hostName="h"),
        master_pb2.HeartResponseM2P)
    assert list(heartbeat.topicInfos) == ["fe-meta#1:4:1#1048576"] and not heartbeat.brokerInfos
    unknown = client.call(master, rpc.PRODUCER_HEARTBEAT, master_pb2.HeartRequestP2M(
        clientId="nobody", brokerCheckSum=-1, hostName="h"), master_pb2.HeartResponseM2P)
    assert unknown.errCode == ErrorCode.HB_NO_NODE


def test_send_checks_the_checksum_and_the_partition(client, tubemq):
    client.call(master_address(tubemq), rpc.PRODUCER_REGISTER, master_pb2.RegisterRequestP2M(
        clientId="p-crc", topicList=["fe-crc"], brokerCheckSum=-1, hostName="h"), master_pb2.RegisterResponseM2P)
    assert send(client, tubemq, "fe-crc", 0, b"x", check=-1).success
    assert send(client, tubemq, "fe-crc", 0, b"x", check=12345).errCode == ErrorCode.FORBIDDEN
    assert send(client, tubemq, "fe-crc", 9, b"x").errCode == ErrorCode.PARTITION_UNPUBLISHABLE


def test_consumer_gets_its_partitions_through_heartbeat_events(client, tubemq):
    master = master_address(tubemq)
    client.call(master, rpc.CONSUMER_REGISTER, master_pb2.RegisterRequestC2M(
        clientId="c-ev", groupName="g-ev", hostName="h", topicList=["fe-ev"]), master_pb2.RegisterResponseM2C)

    def event():
        response = client.call(master, rpc.CONSUMER_HEARTBEAT, master_pb2.HeartRequestC2M(
            clientId="c-ev", groupName="g-ev", reportSubscribeInfo=False), master_pb2.HeartResponseM2C)
        return response.event if response.HasField("event") else None

    received = wait_for(event, timeout=10, message="no balancing event")
    assert received.opType == 10 and len(received.subscribeInfo) == 4
    client.call(master, rpc.CONSUMER_CLOSE, master_pb2.CloseRequestC2M(clientId="c-ev", groupName="g-ev"),
                master_pb2.CloseResponseM2C)


def test_partition_occupied_booking_and_filters(client, tubemq):
    client.call(master_address(tubemq), rpc.PRODUCER_REGISTER, master_pb2.RegisterRequestP2M(
        clientId="p-book", topicList=["fe-book"], brokerCheckSum=-1, hostName="h"), master_pb2.RegisterResponseM2P)
    for index in range(3):
        assert send(client, tubemq, "fe-book", 1, b"m%d" % index, msg_type="even" if index % 2 == 0 else "odd").success
    assert register(client, tubemq, "c1", "g-book", "fe-book", 1).success
    assert register(client, tubemq, "c2", "g-book", "fe-book", 1).errCode == ErrorCode.PARTITION_OCCUPIED
    first = get(client, tubemq, "c1", "g-book", "fe-book", 1)
    assert [m.payLoadData[-2:] for m in first.messages] == [b"m0", b"m1", b"m2"]
    again = get(client, tubemq, "c1", "g-book", "fe-book", 1, consumed=False)     # rolled back: redelivered
    assert len(again.messages) == 3
    done = get(client, tubemq, "c1", "g-book", "fe-book", 1, consumed=True)
    assert done.errCode == ErrorCode.NOT_FOUND and done.currOffset == 3 * INDEX_ENTRY_BYTES     # TubeMQ's unit
    assert register(client, tubemq, "c1", "g-book", "fe-book", 1, op_type=32).success
    assert get(client, tubemq, "c1", "g-book", "fe-book", 1).errCode == ErrorCode.HB_NO_NODE
    # c2 takes over at the committed offset; a filtered group sees only its type.
    assert register(client, tubemq, "c2", "g-book", "fe-book", 1).currOffset == 3 * INDEX_ENTRY_BYTES
    assert register(client, tubemq, "c3", "g-filter", "fe-book", 1, filters=["even"]).success
    filtered = get(client, tubemq, "c3", "g-filter", "fe-book", 1)
    assert [m.payLoadData[-2:] for m in filtered.messages] == [b"m0", b"m2"]


def test_a_standby_master_answers_standby_exception(client, tubemq):
    master = tubemq.front_end("master")
    master.standby = True
    try:
        with pytest.raises(StandbyError):
            client.call(master_address(tubemq), rpc.PRODUCER_REGISTER, master_pb2.RegisterRequestP2M(
                clientId="p-sb", brokerCheckSum=-1, hostName="h"), master_pb2.RegisterResponseM2P)
    finally:
        master.standby = False


def test_cli_flags_make_tubemq_listeners(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--tubemq-master", "127.0.0.1:0",
                                      "--tubemq-broker", "127.0.0.1:0"])
    assert [listener.protocol for listener in broker_config(args).listeners] == ["tubemq-master", "tubemq-broker"]
