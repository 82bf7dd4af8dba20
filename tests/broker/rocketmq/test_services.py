"""The RocketMQ front end's services on their own and across restarts: channel expiry of silent clients, the
delay levels' schedule surviving a restart, sends under SYNC_FLUSH, and the command line's listener flags."""
from __future__ import annotations

import json

from fastmq.broker.rocketmq.clients import CHANNEL_EXPIRED_S, ClientTable, parse_heartbeat
from fastmq.cli import build_parser
from fastmq.cli.broker import broker_config
from fastmq.store import FlushDiskType, MessageStoreConfig
from tests.support.waiting import wait_for

from .conftest import Remoting, broker_address, rocketmq_broker
from .test_endpoint import heartbeat_body, pulled, send


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class Connection:
    """What ClientTable keys channels by: any object standing for a connection."""


def test_silent_clients_expire_and_their_groups_change():
    clock = Clock()
    table = ClientTable(clock)
    changes = []
    table.change_listeners.append(lambda group, ids: changes.append((group, ids)))
    quiet, beating = Connection(), Connection()
    table.heartbeat(quiet, "JAVA", 453, parse_heartbeat(json.loads(heartbeat_body("q", "eg", "t"))))
    table.heartbeat(beating, "CPP", 63, parse_heartbeat({"clientID": "b", "consumerDataSet": [
        {"groupName": "eg", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 4,
         "subscriptionDataSet": [{"topic": "t", "subString": "TagA || TagB", "subVersion": "1795654198381"}]}]}))
    assert table.consumer_ids("eg") == ["b", "q"]
    # the C++ client's enum numbers are taken as names, its quoted subVersion as a number
    assert table.subscription("eg", "t").tags == "TagA || TagB"
    assert table.subscription("eg", "t").sub_version == 1795654198381
    clock.now += CHANNEL_EXPIRED_S / 2
    table.heartbeat(beating, "CPP", 63, parse_heartbeat({"clientID": "b", "consumerDataSet": [
        {"groupName": "eg", "subscriptionDataSet": [{"topic": "t", "subString": "*"}]}]}))
    clock.now += CHANNEL_EXPIRED_S / 2 + 1
    assert table.scan_expired() == [quiet]
    assert table.consumer_ids("eg") == ["b"] and changes[-1] == ("eg", ["b"])


def test_scheduled_messages_survive_a_restart(tmp_path):
    options = {"front_end_options": {"rocketmq": {"message_delay_level": "1s 2s"}}}
    embedded = rocketmq_broker(tmp_path / "data", **options).start()
    try:
        client = Remoting(broker_address(embedded))
        send(client, "sched-restart", b"after the restart", properties={"DELAY": "1"})
        client.close()
        embedded.restart()
        client = Remoting(broker_address(embedded))
        messages = wait_for(lambda: pulled(client, "sched-restart", 0)[1], timeout=30,
                            message="the scheduled message was lost in the restart")
        assert [m.body for m in messages] == [b"after the restart"]
        client.close()
        # the level's offset moved past it and was persisted: a second restart delivers nothing again (due
        # messages are delivered while the broker starts)
        embedded.restart()
        assert embedded.broker.store.get_max_offset("sched-restart", 0) == 1
    finally:
        embedded.close()


def test_sync_flush_sends(tmp_path):
    store = MessageStoreConfig(mapped_file_size_commit_log=4 << 20, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with rocketmq_broker(tmp_path / "data", store=store) as embedded:
        client = Remoting(broker_address(embedded))
        assert send(client, "sync-flushed", b"durable")["queueOffset"] == "0"
        assert embedded.broker.store.commit_log.flushed_where > 0
        client.close()


def test_command_line_listener_flags(tmp_path):
    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0",
                                      "--rocketmq", "127.0.0.1:10911", "--namesrv", "127.0.0.1:9876"])
    config = broker_config(args)
    assert [(listener.protocol, listener.port) for listener in config.listeners] == [
        ("kafka", 0), ("rocketmq", 10911), ("namesrv", 9876)]
    only_rocketmq = broker_config(build_parser().parse_args(["broker", "--data-dir", str(tmp_path),
                                                              "--rocketmq", "127.0.0.1:0"]))
    assert [listener.protocol for listener in only_rocketmq.listeners] == ["rocketmq"]
