"""Fixtures of the RocketMQ front-end tests: an embedded broker with a kafka, a namesrv and a rocketmq listener
(delay levels shortened to 100 ms so that retries come back within a test), and Remoting, a blocking client
connection that speaks commands through fastmq.rocketmq's codec and matches answers by opaque."""
from __future__ import annotations

import itertools
import socket
from typing import Any

import pytest
from fastmq.rocketmq._native.remoting import VERSION, decode_command, encode_frame

from fastmq._native.frames import RocketMQFrameSplitter
from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig

FAST_DELAY_LEVELS = " ".join(["100ms"] * 18)


def rocketmq_broker(path, **options: Any) -> EmbeddedBroker:
    options.setdefault("commit_log_file_size", 4 << 20)
    options.setdefault("front_end_options", {"rocketmq": {"message_delay_level": FAST_DELAY_LEVELS}})
    return EmbeddedBroker(path, listeners=[ListenerConfig(port=0), ListenerConfig(port=0, protocol="namesrv"),
                                           ListenerConfig(port=0, protocol="rocketmq")], **options)


def namesrv_address(broker: EmbeddedBroker) -> tuple[str, int]:
    return broker.addresses[1]


def broker_address(broker: EmbeddedBroker) -> tuple[str, int]:
    return broker.addresses[2]


class Remoting:
    """One client connection: call() sends a request and returns the answer with its opaque (answers to other
    requests arriving first are kept for their callers)."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.splitter = RocketMQFrameSplitter()
        self.opaques = itertools.count(1)
        self.answers: dict[int, Any] = {}
        self.requests: list[Any] = []      # requests the server sent us (NOTIFY_CONSUMER_IDS_CHANGED)

    def send(self, code: int, fields: dict[str, Any] | None = None, body: bytes | None = None,
             flag: int = 0, version: int = VERSION) -> int:
        opaque = next(self.opaques)
        self.sock.sendall(encode_frame(code, opaque, fields, body, flag, version=version))
        return opaque

    def answer(self, opaque: int) -> Any:
        while opaque not in self.answers:
            frame = self.splitter.next_frame()
            if frame is None:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("the broker closed the connection")
                self.splitter.feed(data)
                continue
            command = decode_command(frame)
            if command.is_response:
                self.answers[command.opaque] = command
            else:
                self.requests.append(command)
        return self.answers.pop(opaque)

    def call(self, code: int, fields: dict[str, Any] | None = None, body: bytes | None = None) -> Any:
        return self.answer(self.send(code, fields, body))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def rmq(tmp_path_factory):
    with rocketmq_broker(tmp_path_factory.mktemp("rocketmq") / "data") as embedded:
        yield embedded


@pytest.fixture
def client(rmq):
    connection = Remoting(broker_address(rmq))
    yield connection
    connection.close()


@pytest.fixture
def namesrv(rmq):
    connection = Remoting(namesrv_address(rmq))
    yield connection
    connection.close()
