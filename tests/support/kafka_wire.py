"""A blocking Kafka wire connection speaking the protocol with fastmq's codecs, byte for byte: for tests that
send requests by hand and for asking a real broker whether it is up."""
from __future__ import annotations

import socket
import struct
from typing import Any

from fastmq.kafka import protocol as kp

from tests.support.sockets import recv_exact
from tests.support.waiting import WAIT

class Wire:
    """One blocking connection: request() sends a request and returns the decoded response body."""

    def __init__(self, address: tuple[str, int] | str, client_id: str = "wire-test") -> None:
        if isinstance(address, str):
            host, port = address.rsplit(":", 1)
            address = (host, int(port))
        self.sock = socket.create_connection(address, timeout=WAIT)
        self.client_id = client_id
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: Any) -> int:
        self.correlation_id += 1
        frame = kp.encode_request(api_key, version, self.correlation_id, self.client_id, body)
        self.sock.sendall(bytes(memoryview(frame)))
        return self.correlation_id

    def receive_frame(self) -> bytes:
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        return recv_exact(self.sock, size)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        received_id, body = kp.decode_response(api_key, version, self.receive_frame())
        assert received_id == correlation_id
        return body

    def request(self, api_key: int, version: int, body: Any) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def closed_by_peer(self, timeout: float = WAIT) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionError, OSError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

