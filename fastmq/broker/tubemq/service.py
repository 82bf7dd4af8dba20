"""One TubeMQ RPC listener: request frames decoded, the method's handler called, its response framed.

A handler takes the decoded request message and the connection and returns the response message; an exception
other than a ProtocolError becomes an exception response (status ERROR) naming it, as the Java servers answer.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from fastmq._native.frames import TubeMQFrameSplitter
from fastmq.broker.config import ListenerConfig
from fastmq.errors import ProtocolError
from fastmq.io import IOLoop, Listener, Reply, ServerConnection, ServerHandler
from fastmq.io.tls import create_server_context
from fastmq.tubemq import rpc

log = logging.getLogger(__name__)

Handler = Callable[[Any, ServerConnection], Any]


class Refusal(Exception):
    """An exception response a handler means to give (a standby master's): answered, not logged as a failure."""


class RpcService(ServerHandler):
    """Serves `methods` ({method id: (request class, handler)}) on one listening socket."""

    def __init__(self, loop: IOLoop, config: ListenerConfig, methods: dict[int, tuple[type, Handler]],
                 on_connection_lost: Callable[[ServerConnection], None] | None = None) -> None:
        self.methods = methods
        self.on_connection_lost = on_connection_lost
        context = None
        if config.uses_tls:
            context = create_server_context(ssl_certfile=config.ssl_certfile, ssl_keyfile=config.ssl_keyfile,
                                            ssl_password=config.ssl_password, ssl_cafile=config.ssl_cafile,
                                            ssl_client_auth=config.ssl_client_auth)
        self.listener = Listener(loop, TubeMQFrameSplitter, self, config.host, config.port, ssl_context=context,
                                 max_pending_replies=1024)
        self.config = config
        self.address = self.listener.address

    @property
    def advertised(self) -> tuple[str, int]:
        return self.config.advertised(self.address)

    def frame_received(self, conn: ServerConnection, frame: Any, reply: Reply) -> None:
        serial_no, payload = frame
        request = rpc.decode_request(serial_no, payload)
        entry = self.methods.get(request.method)
        if entry is None:
            reply(rpc.encode_exception(serial_no, "java.lang.UnsupportedOperationException",
                                       f"method {request.method} is not served here"))
            return
        request_class, handler = entry
        message = rpc.decode_message(request_class, request.body)
        try:
            response = handler(message, conn)
        except ProtocolError:
            raise
        except Exception as exc:
            if isinstance(exc, Refusal):
                log.debug("TubeMQ method %d refused: %s", request.method, exc)
            else:
                log.exception("TubeMQ method %d failed", request.method)
            reply(rpc.encode_exception(serial_no, f"org.apache.inlong.tubemq.{type(exc).__name__}", str(exc)))
            return
        reply(rpc.encode_response(serial_no, request.method, response.SerializeToString()))

    def connection_lost(self, conn: ServerConnection, error: BaseException) -> None:
        if self.on_connection_lost is not None:
            self.on_connection_lost(conn)

    def close(self) -> None:
        self.listener.close()
