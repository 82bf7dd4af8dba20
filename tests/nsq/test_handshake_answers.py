"""What the client does when an nsqd answers IDENTIFY with something other than OK or a JSON object of settings
it can use: the connection is dropped with a ProtocolError that names the answer, and a publish fails with it (a
scripted nsqd on 127.0.0.1: the real nsqd never sends these)."""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from fastmq.nsq import NSQNoConnectionsError, Producer
from fastmq.nsq._native import codec
from tests.support.sockets import recv_exact

WAIT = 20.0
ACCEPT_WAIT = 0.2
ACCEPT_TURNS = 200          # of ACCEPT_WAIT each: the server's bound, beyond the publish's WAIT


def answer_identify_with(server: socket.socket, answer: bytes, stop: threading.Event) -> None:
    """Accept connections until told to stop; read the magic and the IDENTIFY command of each, answer with
    `answer` as a response frame."""
    server.settimeout(ACCEPT_WAIT)
    for _ in range(ACCEPT_TURNS):
        if stop.is_set():
            return
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(WAIT)
            try:
                assert recv_exact(conn, len(codec.MAGIC_V2)) == codec.MAGIC_V2
                assert recv_exact(conn, len(b"IDENTIFY\n")) == b"IDENTIFY\n"
                recv_exact(conn, struct.unpack(">i", recv_exact(conn, 4))[0])
                conn.sendall(struct.pack(">ii", 4 + len(answer), codec.FRAME_RESPONSE) + answer)
                conn.recv(1)            # until the client drops the connection
            except OSError:
                pass


@pytest.mark.parametrize(("answer", "said"), [
    (b"{not json", "nsqd's IDENTIFY answer: not JSON"),
    (b"\xff\xfe", "nsqd's IDENTIFY answer: not JSON"),
    (b"[1]", "nsqd's IDENTIFY answer: a JSON object was expected, got an array"),
    (b"7", "nsqd's IDENTIFY answer: a JSON object was expected, got a int"),
    (b'{"deflate": true, "deflate_level": "9"}', "nsqd agreed to deflate at level '9', not at 1 to 9"),
    (b'{"deflate": true, "deflate_level": 12}', "nsqd agreed to deflate at level 12, not at 1 to 9"),
])
def test_an_identify_answer_that_is_no_json_object_fails_the_publish(answer: bytes, said: str) -> None:
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        serving = threading.Thread(target=answer_identify_with, args=(server, answer, stop), daemon=True)
        serving.start()
        try:
            with Producer("127.0.0.1:%d" % server.getsockname()[1]) as producer:
                with pytest.raises(NSQNoConnectionsError, match=said):
                    producer.publish("t", b"body").result(WAIT)
        finally:
            stop.set()
            serving.join(WAIT)
    assert not serving.is_alive()
