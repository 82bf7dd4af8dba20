"""The remoting layer of the client: requests to namesrvs and brokers by address over fastmq.io.

Any thread calls `invoke`: the caller encodes the frame (fastmq.rocketmq._native.remoting), the request joins an
outbox and the loop is woken once (IOLoop.wakeup costs nothing while a wakeup is pending), so a burst of sends is
one hand-over, not one per message. A caller that waits for its answer (call(), a synchronous send) first tries
`call_frame`: it borrows the address's connection for its round trip when nothing else is in flight there
(Connection.call_blocking), writes, reads and decodes the response on its own thread, and the loop hears
nothing of it. Otherwise it writes the request itself when its connection has nothing queued
(Connection.request_now) and the loop reads the answer. The loop's poll hook drains
the outbox onto the connections (ConnectionPool, one per address); a run of oneway requests to one connection
becomes one unanswered request of many frames. Requests to an address still connecting wait for it, and fail with
the connection's error if it cannot be made. Responses complete their callback on the loop thread. Requests handed
over with hold_until count against the client's max_pending_bytes until they are done
(fastmq/rocketmq/_native/pending.pyx): the caller waits for room. A borrowed round trip holds none: its request is
never queued in the client (its caller holds it, at most one a connection), and it is done when call_frame returns.

Requests are encoded with ROCKETMQ binary headers by default (written in compiled code; JSON costs about 40 us more
per request in json.dumps); responses are read in whichever encoding the server chose.

Requests the server sends (a broker telling a consumer that its group changed, or asking for its running info)
go to `on_server_request`, which answers at once or with a Future (answered when it completes, from any thread);
those it does not handle are answered REQUEST_CODE_NOT_SUPPORTED, as Java does.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

from fastmq._native.frames import RocketMQFrameSplitter
from fastmq.io import ConnectionPool, IOLoop, ProtocolAdapter
from fastmq.io.errors import ConnectionClosedError, RequestTimeoutError
from fastmq.rocketmq._native.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    decode_command,
    encode_frame,
    response_opaque,
)
from fastmq.rocketmq.acl import Credentials
from fastmq.rocketmq.errors import RocketMQError
from fastmq.rocketmq._native.pending import (
    DEFAULT_MAX_PENDING_BYTES,
    DecodingCallback,
    FrameCallback,
    PendingBytes,
    Written,
)
from fastmq.rocketmq.protocol import ResponseCode

_log = logging.getLogger(__name__)

ResponseCallback = Callable[[RemotingCommand | None, BaseException | None], Any]
MAX_IN_FLIGHT = 1 << 20      # per connection: RocketMQ pipelines freely; the send timeout bounds the wait
# Oneway requests take their opaques from the upper half of the positive ones, answered requests from the lower:
# Apache's broker answers a oneway request that waited too long in its send queue ([TIMEOUT_CLEAN_QUEUE] or
# [PCBUSY_CLEAN_QUEUE] SYSTEM_BUSY, RequestTask.returnResponse does not look at the oneway flag), and such an
# answer must be told from a response that matches no request (which breaks the protocol).
ONEWAY_OPAQUE = 1 << 30
OPAQUE_MASK = ONEWAY_OPAQUE - 1
CLOSE_LINGER = 1.0           # at most this long at close for queued requests to be written


class RocketMQAdapter(ProtocolAdapter):
    """Frames are remoting commands; a response's opaque names its request, requests from the server none."""

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size

    def make_splitter(self) -> RocketMQFrameSplitter:
        return RocketMQFrameSplitter(self.max_frame_size)

    def correlation_id(self, frame: Any) -> int | None:
        opaque: int | None = response_opaque(frame)
        if opaque is not None and opaque & ONEWAY_OPAQUE:
            return None         # the answer to a oneway request: on_push (RemotingClient._on_push) counts it
        return opaque


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a RocketMQ address is host:port, not {address!r}")
    return host.strip("[]"), int(port)


def _future_reply(done: Future[RemotingCommand], request: RemotingCommand) -> RemotingCommand:
    try:
        return done.result()
    except Exception as exc:
        _log.exception("handling server request %r failed", request)
        return RemotingCommand(ResponseCode.SYSTEM_ERROR, request.opaque, flag=FLAG_RESPONSE, remark=str(exc))


class RemotingClient:
    """Requests by address ("host:port") from any thread; one I/O loop thread does the network work."""

    def __init__(self, *, connect_timeout: float = 3.0, request_timeout: float = 3.0,
                 serialize_type: int = SERIALIZE_ROCKETMQ, max_frame_size: int = 16 * 1024 * 1024,
                 name: str = "fastmq-rocketmq", credentials: Credentials | None = None,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        self.credentials = credentials
        self.pending = PendingBytes(max_pending_bytes)
        self.serialize_type = serialize_type
        self.request_timeout = request_timeout
        self.on_server_request: Callable[[str, RemotingCommand], RemotingCommand | Future[RemotingCommand] | None] | None = None
        self.loop = IOLoop(name)
        self.pool = ConnectionPool(
            self.loop, lambda: RocketMQAdapter(max_frame_size), connect_timeout_ms=connect_timeout * 1000,
            request_timeout_ms=request_timeout * 1000, max_in_flight=MAX_IN_FLIGHT, on_push=self._on_push,
            connections_max_idle_ms=None)
        self.pool.add_listener(self._node_changed)
        self._opaques = itertools.count(1)
        # (address, frame, opaque, callback, oneway, timeout, bytes held in self.pending, decode the response)
        self._outbox: deque[tuple[str, Any, int, ResponseCallback | None, bool, float, int, bool]] = deque()
        self._waiting: dict[str, deque[Any]] = {}
        self.oneway_refused = 0     # oneway requests a broker answered: dropped unprocessed (_oneway_answered)
        self._refused_said: set[str] = set()
        self._closed = False
        self.loop.start()
        self.loop.add_poll_hook(self._drain)

    # ---- sending (any thread) ------------------------------------------------------------------------

    def next_opaque(self, oneway: bool = False) -> int:
        """The opaque of a new request (from the oneway half for a oneway request, ONEWAY_OPAQUE)."""
        opaque = next(self._opaques) & OPAQUE_MASK
        return opaque | ONEWAY_OPAQUE if oneway else opaque

    def encode(self, code: int, ext_fields: dict[Any, Any] | None = None, body: Any = None, *, oneway: bool = False,
               opaque: int | None = None, remark: str | None = None) -> tuple[bytes, int]:
        """A request frame and its opaque (signed when the client has ACL credentials)."""
        opaque = self.next_opaque(oneway) if opaque is None else opaque
        if self.credentials is not None:
            ext_fields = self.credentials.sign(ext_fields, body)
        return encode_frame(code, opaque, ext_fields, body, FLAG_ONEWAY if oneway else 0,
                            self.serialize_type, remark=remark), opaque

    def invoke_frame(self, address: str, frame: Any, opaque: int, callback: ResponseCallback | None, *,
                     oneway: bool = False, timeout: float | None = None, wait: bool = False,
                     hold_until: float | None = None, decode: bool = True) -> None:
        """Send an encoded request; callback(response, None) or callback(None, error) on the loop thread
        (for a oneway request: callback(None, None) once written). wait=True: the caller is about to wait for
        the answer, and writes the request itself if it can (see the module docstring). hold_until: the request
        counts against max_pending_bytes until done, and the caller waits for room until this monotonic time
        (SendBufferFullError). decode=False: the callback gets the response frame as read (without `total`),
        for a caller that decodes it itself."""
        if self._closed:
            raise RocketMQError("the RocketMQ client is closed")
        held = 0
        if hold_until is not None:
            held = len(frame)
            self.pending.reserve(held, hold_until)
        if timeout is None:
            timeout = self.request_timeout
        if wait and not oneway and not self._outbox:
            conn = self.pool.connection(address)
            if conn is not None and conn.request_now(frame, self._answer_callback(callback, held, decode), opaque,
                                                     timeout=timeout):
                return
        self._outbox.append((address, frame, opaque, callback, oneway, timeout, held, decode))
        self.loop.wakeup()

    def call_frame(self, address: str, frame: Any, opaque: int, deadline: float, *,
                   decode: bool = True) -> Any | None:
        """The calling thread's own round trip of an encoded request (see the module docstring): the response
        (any code; its frame as read when decode=False), or None, with nothing sent, when the address's
        connection cannot be lent now (then invoke_frame). Raises what broke the round trip
        (ConnectionClosedError, RequestTimeoutError at the monotonic time `deadline`, a malformed response's
        error)."""
        if self._closed:
            raise RocketMQError("the RocketMQ client is closed")
        conn = self.pool.connection(address)
        if conn is None:
            return None
        response = conn.call_blocking(frame, opaque, deadline)
        return response if response is None or not decode else decode_command(response)

    def invoke(self, address: str, code: int, ext_fields: dict[Any, Any] | None = None, body: Any = None, *,
               timeout: float | None = None) -> Future[RemotingCommand]:
        """A Future of the response (a RemotingCommand; any response code)."""
        future: Future[RemotingCommand] = Future()
        frame, opaque = self.encode(code, ext_fields, body)
        self.invoke_frame(address, frame, opaque, future_callback(future), timeout=timeout)
        return future

    def call(self, address: str, code: int, ext_fields: dict[Any, Any] | None = None, body: Any = None, *,
             timeout: float | None = None) -> RemotingCommand:
        """The response, waited for (on the calling thread's own round trip when it can borrow the connection)."""
        timeout = self.request_timeout if timeout is None else timeout
        frame, opaque = self.encode(code, ext_fields, body)
        response: RemotingCommand | None = self.call_frame(address, frame, opaque, time.monotonic() + timeout)
        if response is not None:
            return response
        future: Future[RemotingCommand] = Future()
        self.invoke_frame(address, frame, opaque, future_callback(future), timeout=timeout, wait=True)
        return future.result(timeout + 1.0)

    def oneway(self, address: str, code: int, ext_fields: dict[Any, Any] | None = None, body: Any = None) -> None:
        frame, opaque = self.encode(code, ext_fields, body, oneway=True)
        self.invoke_frame(address, frame, opaque, None, oneway=True)

    # ---- the loop side ---------------------------------------------------------------------------------

    def _drain(self) -> float | None:
        outbox = self._outbox
        run: list[tuple[Any, ...]] = []     # consecutive requests of one kind (oneway or not) to one connection
        run_conn = run_oneway = None
        while outbox:
            item = outbox.popleft()
            address = item[0]
            waiting = self._waiting.get(address)
            if waiting is not None:
                waiting.append(item)
                continue
            conn = self.pool.connection(address)
            if conn is None:
                self._connect(address, item)
                continue
            if run and (conn is not run_conn or item[4] is not run_oneway):
                self._submit_run(run_conn, run)
                run = []
            run_conn, run_oneway = conn, item[4]
            run.append(item)
        if run:
            self._submit_run(run_conn, run)
        return None

    def _submit_run(self, conn: Any, items: list[tuple[Any, ...]]) -> None:
        """Requests to one connection, all oneway or all answered: one hand-over to it."""
        if items[0][4]:
            self._submit_oneways(conn, items)
        elif len(items) == 1:
            self._submit(conn, items[0])
        else:
            try:
                conn.request_many([(item[1], self._answer_callback(item[3], item[6], item[7]), item[2], item[5])
                                   for item in items])
            except Exception:       # one of them is refused (a repeated opaque, max_in_flight): each on its own
                for item in items:
                    self._submit(conn, item)

    def _submit_oneways(self, conn: Any, items: list[tuple[Any, ...]]) -> None:
        # A burst of oneway sends becomes one unanswered request of many frames: one completion when written,
        # not one per message (and no object per message kept alive until then).
        try:
            conn.request([item[1] for item in items],
                         Written([item[3] for item in items if item[3] is not None], self.pending,
                                 sum([item[6] for item in items])),
                         expect_response=False, timeout=items[0][5])
        except Exception as exc:     # the connection closed under us
            for item in items:
                self._fail(item, exc)

    def _connect(self, address: str, item: tuple[Any, ...]) -> None:
        try:
            host, port = split_address(address)
            self.pool.add_node(address, host, port)
        except ValueError as exc:
            self._fail(item, exc)
            return
        self._waiting[address] = deque([item])
        if not self.pool.maybe_connect(address):
            # In reconnect backoff: try again when it has passed.
            self.loop.call_later(self.pool.connection_delay(address), self._retry_connect, address)

    def _retry_connect(self, address: str) -> None:
        if address in self._waiting and not self.pool.maybe_connect(address):
            self.loop.call_later(max(0.01, self.pool.connection_delay(address)), self._retry_connect, address)

    def _node_changed(self, address: Any, ready: bool, error: BaseException | None) -> None:
        waiting = self._waiting.pop(address, None)
        if not waiting:
            return
        conn = self.pool.connection(address) if ready else None
        for item in waiting:
            if conn is not None:
                self._submit(conn, item)
            else:
                self._fail(item, error or ConnectionClosedError(f"cannot connect to {address}"))

    def _answer_callback(self, callback: ResponseCallback | None, held: int,
                         decode: bool) -> DecodingCallback | FrameCallback:
        """The connection's callback of an answered request: gives back what it held, decodes the response
        unless its caller does."""
        return (DecodingCallback if decode else FrameCallback)(callback, self.pending, held)

    def _submit(self, conn: Any, item: tuple[Any, ...]) -> None:
        _, frame, opaque, callback, oneway, timeout, held, decode = item
        if oneway:
            self._submit_oneways(conn, [item])
            return
        try:
            conn.request(frame, self._answer_callback(callback, held, decode), opaque, timeout=timeout)
        except Exception as exc:     # the connection closed under us, or the opaque is in use
            self._fail(item, exc)

    def _fail(self, item: tuple[Any, ...], error: BaseException) -> None:
        if item[6]:
            self.pending.release(item[6])
        callback = item[3]
        if callback is not None:
            try:
                callback(None, error)
            except Exception:
                _log.exception("RocketMQ response callback failed")

    def _on_push(self, conn: Any, frame: Any) -> None:
        request = decode_command(frame)
        if request.is_response:
            self._oneway_answered(conn, request)
            return
        reply = None
        if self.on_server_request is not None:
            try:
                reply = self.on_server_request(conn.node_id, request)
            except Exception:
                _log.exception("handling server request %r failed", request)
        if request.is_oneway:
            return
        if isinstance(reply, Future):
            # answered later by another thread (a listener consuming a message the broker handed over)
            reply.add_done_callback(lambda done: self.loop.call_soon_threadsafe(
                self._reply, conn, request, _future_reply(done, request)))
            return
        self._reply(conn, request, reply)

    def _oneway_answered(self, conn: Any, response: RemotingCommand) -> None:
        # Apache answers a oneway request only when it dropped it from its send queue unprocessed (SYSTEM_BUSY,
        # [TIMEOUT_CLEAN_QUEUE] or [PCBUSY_CLEAN_QUEUE]): the message was not stored. Counted, and said once a
        # connection: the oneway pace (fastmq/rocketmq/oneway_pace.py) keeps a producer's own sends from causing it.
        self.oneway_refused += 1
        if conn.node_id not in self._refused_said:
            self._refused_said.add(conn.node_id)
            _log.warning("%s answered a oneway request with %d (%s): it was not stored; later ones are counted in "
                         "oneway_refused", conn.node_id, response.code, response.remark)

    def _reply(self, conn: Any, request: RemotingCommand, reply: RemotingCommand | None) -> None:
        if reply is None:
            reply = RemotingCommand(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, request.opaque, flag=FLAG_RESPONSE,
                                    remark=f"request code {request.code} not supported by fastmq")
        try:
            conn.send_frame(encode_frame(reply.code, request.opaque, reply.ext_fields, reply.body, FLAG_RESPONSE,
                                         self.serialize_type, remark=reply.remark))
        except Exception as exc:      # the connection closed while the answer was being made
            _log.debug("answering server request %d failed: %s", request.code, exc)

    # ---- closing -----------------------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        done = threading.Event()
        linger_until = time.monotonic() + min(timeout, CLOSE_LINGER)

        def shut() -> None:
            self._drain()
            self.loop.call_soon(close_when_written)     # after the next iteration's flush

        def close_when_written() -> None:
            # The last requests (oneway sends, unregistrations) leave before the sockets close; no fixed wait.
            if time.monotonic() < linger_until and any(
                    conn is not None and conn.pending_output for conn in map(self.pool.connection, self.pool.nodes)):
                self.loop.call_later(0.001, close_when_written)
                return
            self.pool.close()
            done.set()

        try:
            self.loop.call_soon_threadsafe(shut)
            done.wait(timeout)
        finally:
            self.loop.close(timeout)


def future_callback(future: Future[Any]) -> ResponseCallback:
    def done(response: RemotingCommand | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error if not isinstance(error, RequestTimeoutError) else error)
        else:
            future.set_result(response)
    return done
