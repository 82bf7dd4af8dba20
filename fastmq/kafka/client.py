"""KafkaClient: the network side shared by the producer, the consumer and the admin client.

It owns one I/O loop thread and a connection pool, bootstraps from a list of servers, keeps the cluster
metadata fresh (fastmq.client.metadata decides when: periodically, on demand, when a request reports a
leader or topic error, when a broker's connection fails, every retry_backoff_ms for a while when a partition
has no reachable leader, with a backoff while a topic is unknown), and sends requests with the highest API
version each broker supports.

Two ways to send:
- on the loop thread (the producer's sender, the consumer's fetcher): send(node_id, request, callback), for
  a node that is_ready(); the callback gets (response, None) or (None, error) on the loop thread.
- from any thread: call(node_id, request, timeout) returns a concurrent.futures.Future, connecting first
  (and retrying the connection within the timeout) when needed; node_id None picks the least loaded node.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, cast

from fastmq.client import (
    CallHooks, CallQueue, MetadataRefresh, PendingCall, RetryPolicy, metadata_candidates, parse_servers,
)
from fastmq.client.nodes import is_failing
from fastmq.closeable import Closeable
from fastmq.errors import ConfigurationError, FastMQError
from fastmq.io import (
    DEFAULT_SOCKET_OPTIONS, AuthenticationError, Connection, ConnectionPool, IOLoop, IOMetrics, NetworkError,
    RequestTimeoutError, TLSError,
)
from fastmq.io.tls import create_client_context
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.cluster import ClusterMetadata
from fastmq.kafka.connection import KafkaAdapter

_log = logging.getLogger(__name__)

DEFAULT_PORT = 9092

ResponseCallback = Callable[[Any, BaseException | None], None]


@dataclass
class ClientConfig:
    """Connection settings, with kafka-python's names and defaults, except reconnect_backoff_max_ms (and
    retry_backoff_max_ms, which kafka-python lacks), which are the Java client's."""

    bootstrap_servers: str | list[str] = "localhost"
    client_id: str | None = None
    request_timeout_ms: float = 30000
    connections_max_idle_ms: float = 540000
    reconnect_backoff_ms: float = 50
    # The Java client's 1 s, not kafka-python's 30 s: a broker back after some downtime is reconnected to
    # within a second (it took up to the 30 s cap before; the compat faces keep kafka-python's value).
    reconnect_backoff_max_ms: float = 1000
    max_in_flight_requests_per_connection: int = 5
    receive_message_max_bytes: int = 100_000_000
    retry_backoff_ms: float = 100
    retry_backoff_max_ms: float = 1000     # metadata refreshes back off up to this (Kafka's KIP-580 default)
    metadata_max_age_ms: float = 300000
    allow_auto_create_topics: bool = True
    security_protocol: str = "PLAINTEXT"
    ssl_context: Any = None
    ssl_check_hostname: bool = True
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_crlfile: str | None = None
    ssl_password: Any = None
    ssl_ciphers: str | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    socket_options: list[Any] = field(default_factory=lambda: list(DEFAULT_SOCKET_OPTIONS))
    send_buffer_bytes: int | None = None
    receive_buffer_bytes: int | None = None

    def validate(self) -> None:
        protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
        if self.security_protocol not in protocols:
            raise kerrors.KafkaConfigurationError(
                f"security_protocol must be one of {protocols}, not {self.security_protocol!r}")
        if self.security_protocol.startswith("SASL"):
            if self.sasl_mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise kerrors.KafkaConfigurationError(
                    f"sasl_mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not {self.sasl_mechanism!r}")
            if self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise kerrors.KafkaConfigurationError(
                    "sasl_plain_username and sasl_plain_password are required with SASL")
        if self.max_in_flight_requests_per_connection < 1:
            raise kerrors.KafkaConfigurationError("max_in_flight_requests_per_connection must be at least 1")


# The option names ClientConfig takes: what Producer, Consumer and Admin pass on to their KafkaClient.
CLIENT_OPTIONS = frozenset(f.name for f in fields(ClientConfig))


class CallFuture(Future[Any]):
    """The Future of KafkaClient.call(): also says which node answered, in which version of the API (the admin
    client reads version-dependent fields)."""

    node_id: Any = None
    api_version: int = -1


def _kafka_adapter(conn: Connection) -> KafkaAdapter:
    # The client's pool makes every connection with a KafkaAdapter (the engine's type is the base class).
    return cast(KafkaAdapter, conn.adapter)


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """'host1:9092,host2' or ['host1:9092', ...] -> [(host, port)]; the port defaults to 9092."""
    try:
        return parse_servers(servers, DEFAULT_PORT)
    except ConfigurationError as exc:
        raise kerrors.KafkaConfigurationError(f"bootstrap_servers: {exc}") from None


def is_retriable(error: BaseException) -> bool:
    """Kafka's retry classification: retriable errors, and stale metadata (which a refresh may fix)."""
    error = kafka_error(error)
    return bool(getattr(error, "retriable", False) or getattr(error, "invalid_metadata", False))


def kafka_error(error: BaseException) -> BaseException:
    """The kafka-python-shaped exception for an error of the network engine (others pass through)."""
    if isinstance(error, kerrors.KafkaError):
        return error
    if isinstance(error, RequestTimeoutError):
        converted: BaseException = kerrors.RequestTimedOutError(str(error))
    elif isinstance(error, (AuthenticationError,)):
        converted = kerrors.SaslAuthenticationFailedError(str(error))
    elif isinstance(error, TLSError):
        converted = kerrors.KafkaConnectionError(f"TLS failed: {error}")
    elif isinstance(error, (NetworkError, OSError)):
        converted = kerrors.KafkaConnectionError(str(error))
    else:
        return error
    converted.__cause__ = error
    return converted


class KafkaClient(Closeable):
    """Connections, API versions and metadata for one producer, consumer or admin client."""

    def __init__(self, config: ClientConfig | None = None, *, loop: IOLoop | None = None,
                 name: str = "fastmq-kafka", **options: Any) -> None:
        self.config = config if config is not None else ClientConfig(**options)
        self.config.validate()
        self.metrics = IOMetrics()
        self._own_loop = loop is None
        self.loop = loop if loop is not None else IOLoop(name=name)
        sasl = None
        if self.config.security_protocol.startswith("SASL"):
            sasl = {"mechanism": self.config.sasl_mechanism, "username": self.config.sasl_plain_username,
                    "password": self.config.sasl_plain_password}
        ssl_context = None
        if self.config.security_protocol in ("SSL", "SASL_SSL"):
            ssl_context = create_client_context(
                ssl_context=self.config.ssl_context, ssl_cafile=self.config.ssl_cafile,
                ssl_certfile=self.config.ssl_certfile, ssl_keyfile=self.config.ssl_keyfile,
                ssl_password=self.config.ssl_password, ssl_check_hostname=self.config.ssl_check_hostname,
                ssl_crlfile=self.config.ssl_crlfile, ssl_ciphers=self.config.ssl_ciphers)
        socket_options = list(self.config.socket_options)
        import socket
        if self.config.send_buffer_bytes:
            socket_options.append((socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer_bytes))
        if self.config.receive_buffer_bytes:
            socket_options.append((socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.receive_buffer_bytes))
        client_id, max_frame = self.config.client_id, self.config.receive_message_max_bytes
        self.pool = ConnectionPool(
            self.loop, lambda: KafkaAdapter(client_id=client_id, max_frame_size=max_frame, sasl=sasl),
            ssl_context=ssl_context, connect_timeout_ms=self.config.request_timeout_ms,
            request_timeout_ms=self.config.request_timeout_ms,
            max_in_flight=self.config.max_in_flight_requests_per_connection,
            reconnect_backoff_ms=self.config.reconnect_backoff_ms,
            reconnect_backoff_max_ms=self.config.reconnect_backoff_max_ms,
            connections_max_idle_ms=self.config.connections_max_idle_ms,
            socket_options=socket_options, metrics=self.metrics)
        self.pool.add_listener(self._on_node_state)
        self.cluster = ClusterMetadata()
        self._bootstrap = []
        for index, (host, port) in enumerate(parse_bootstrap_servers(self.config.bootstrap_servers)):
            node_id = f"bootstrap-{index}"
            self.pool.add_node(node_id, host, port)
            self._bootstrap.append(node_id)
        # Metadata state, loop thread only.
        self._topics: set[str] = set()
        self._all_topics = False
        self.refresh = MetadataRefresh(self.config.metadata_max_age_ms / 1000.0,
                                       self.config.retry_backoff_ms / 1000.0,
                                       self.config.retry_backoff_max_ms / 1000.0)
        # For requests retried from a user's thread (offset lookups, ...).
        self.retry = RetryPolicy(is_retriable, backoff_ms=self.config.retry_backoff_ms,
                                 backoff_max_ms=self.config.retry_backoff_max_ms)
        self._waiting = CallQueue(CallHooks(
            self.least_loaded_node, lambda node_id: node_id in self.pool.nodes, self.ready, self.is_failing,
            self._send_pending,
            lambda node_id: kerrors.BrokerNotAvailableError(f"node {node_id!r} is not a known broker of this cluster"),
            self._call_timed_out,
            lambda pending, node_id: kerrors.KafkaConnectionError(
                f"node {node_id} is unreachable for {type(pending.request).__name__}: {self.pool.last_error(node_id)}")))
        self._closed = False
        self.loop.add_poll_hook(self._maintain)
        if self._own_loop:
            self.loop.start()

    # ---- nodes --------------------------------------------------------------------------------------

    def _known_nodes(self) -> list[Any]:
        return metadata_candidates(self.pool, list(self.cluster.brokers), self._bootstrap)

    def _metadata_nodes(self) -> list[Any]:
        # Metadata goes over connections of its own ("metadata-<broker id>"): a broker answers one request of a
        # connection at a time, and a Produce it holds for acks=all (while a dead follower is still in the ISR)
        # or a Fetch held for fetch_max_wait_ms would hold back the answer that says where the leaders went.
        return metadata_candidates(self.pool, [_metadata_node(b) for b in self.cluster.brokers], self._bootstrap)

    def least_loaded_node(self) -> Any | None:
        """Loop thread: the node for a node-independent request (metadata, coordinator lookup)."""
        return self.pool.least_loaded_node(self._known_nodes())

    def is_failing(self, node_id: Any) -> bool:
        """Loop thread: the node's last connection failed and none is up or coming."""
        return is_failing(self.pool, node_id)

    def is_ready(self, node_id: Any) -> bool:
        """Loop thread: connected, handshake done, and below max in-flight."""
        return self.pool.can_send(node_id)

    def ready(self, node_id: Any) -> bool:
        """Loop thread: start connecting if needed; True when a request can be sent now."""
        self.pool.maybe_connect(node_id)
        return self.pool.can_send(node_id)

    def connection_delay(self, node_id: Any) -> float:
        return self.pool.connection_delay(node_id)

    def api_version(self, node_id: Any, api_key: int) -> int:
        """Loop thread: the version of an API negotiated with a connected node."""
        conn = self.pool.connection(node_id)
        if conn is None:
            raise kerrors.NodeNotReadyError(f"node {node_id} is not connected")
        return _kafka_adapter(conn).version_for(api_key)

    def _on_node_state(self, node_id: Any, ready: bool, error: BaseException | None) -> None:
        if ready:
            self._waiting.dispatch(time.monotonic())
        elif error is not None and not self._closed:
            _log.debug("node %r: %s", node_id, error)
            if node_id in self.cluster.brokers:
                # The broker may be gone for good and its partitions led elsewhere by now.
                self._want_metadata(f"the connection to broker {node_id} failed ({error})")

    # ---- sending on the loop thread ---------------------------------------------------------------------

    def send(self, node_id: Any, request: Any, callback: ResponseCallback | None, *,
             expect_response: bool = True, timeout: float | None = None) -> None:
        """Loop thread: send to a ready node; callback(response, None) or (None, error) on the loop thread.

        Raises NodeNotReadyError when the node cannot take a request now (check is_ready first)."""
        api_key = request.API_KEY

        def encode(version: int, correlation_id: int, client_id: str | None) -> Any:
            # Record batches are referenced, not copied, into the frame: they stay unchanged until written (the
            # producer recycles a batch's memory only once nothing else refers to it).
            return kp.encode_request(api_key, version, correlation_id, client_id, request,
                                     kp.WriteBuffer(splice_min=kp.SPLICE_MIN))

        def decode(version: int, frame: Any) -> Any:
            return kp.decode_response(api_key, version, frame)[1]

        self.send_with(node_id, api_key, encode, decode, callback, expect_response=expect_response, timeout=timeout)

    def send_with(self, node_id: Any, api_key: int, encode: Callable[[int, int, str | None], Any],
                  decode: Callable[[int, Any], Any], callback: ResponseCallback | None, *,
                  expect_response: bool = True, timeout: float | None = None) -> None:
        """send() for a caller that writes its request and reads its response itself (the producer's compiled
        Produce path): encode(version, correlation_id, client_id) returns the whole frame (a WriteBuffer, sent as
        its parts()); decode(version, response_frame) returns what the callback gets. A FastMQError from decode
        closes the connection, as a response that cannot be decoded does, and goes to the callback."""
        conn = self.pool.connection(node_id)
        if conn is None or not conn.can_send():
            raise kerrors.NodeNotReadyError(f"node {node_id} cannot take a request now")
        version = _kafka_adapter(conn).version_for(api_key)
        correlation_id = conn.next_correlation_id()
        frame = encode(version, correlation_id, self.config.client_id)

        def on_frame(response_frame: Any, error: BaseException | None) -> None:
            if callback is None:
                return
            if error is not None:
                callback(None, kafka_error(error))
                return
            if not expect_response:
                callback(None, None)
                return
            try:
                response = decode(version, response_frame)
            except FastMQError as exc:
                conn.close(exc)
                callback(None, exc)
                return
            callback(response, None)

        conn.request(frame.parts(), on_frame, correlation_id, expect_response=expect_response, timeout=timeout)
        if not expect_response:
            _kafka_adapter(conn).expect_no_response(correlation_id)

    # ---- sending from any thread ---------------------------------------------------------------------------

    def call(self, node_id: Any, request: Any, timeout: float | None = None, *,
             give_up_when_failing: bool = False) -> CallFuture:
        """Any thread: a Future of the response, connecting first if needed (None: least loaded node).
        give_up_when_failing: end with KafkaConnectionError as soon as the node's connection fails, instead of
        waiting within the timeout for it to come back (for a coordinator, which may have moved)."""
        future = CallFuture()
        deadline = time.monotonic() + (self.config.request_timeout_ms / 1000.0 if timeout is None else timeout)
        self.loop.call_soon_threadsafe(
            self._start_call, PendingCall(node_id, request, future, deadline, give_up_when_failing))
        return future

    def request(self, node_id: Any, request: Any, timeout: float | None = None, *,
                give_up_when_failing: bool = False) -> Any:
        """Any thread (not the loop's): send and wait for the response; raises its error."""
        limit = self.config.request_timeout_ms / 1000.0 if timeout is None else timeout
        try:
            return self.call(node_id, request, timeout, give_up_when_failing=give_up_when_failing).result(limit + 1.0)
        except TimeoutError:
            raise kerrors.KafkaTimeoutError(f"no response to {type(request).__name__} within {limit:.1f} s") from None

    def _start_call(self, pending: PendingCall) -> None:
        if self._closed:
            pending.future.set_exception(kerrors.KafkaConnectionError("the client is closed"))
            return
        self._waiting.add(pending, time.monotonic())

    def _call_timed_out(self, pending: PendingCall, node_id: Any) -> BaseException:
        last = self.pool.last_error(node_id) if node_id is not None else None
        return kerrors.KafkaTimeoutError(
            f"node {pending.node_id if pending.node_id is not None else '(any)'} was not ready "
            f"in time for {type(pending.request).__name__}" + (f": {last}" if last else ""))

    def _send_pending(self, node_id: Any, pending: PendingCall, now: float) -> None:
        def done(response: Any, error: BaseException | None) -> None:
            if pending.future.done():
                return
            if error is not None:
                pending.future.set_exception(error)
            else:
                pending.future.set_result(response)

        try:
            # Which node answered in which version: the admin client reads version-dependent fields.
            future = cast(CallFuture, pending.future)       # call() makes every pending call's future
            future.node_id = node_id
            future.api_version = self.api_version(node_id, pending.request.API_KEY)
            self.send(node_id, pending.request, done, timeout=max(0.001, pending.deadline - now))
        except Exception as exc:
            pending.future.set_exception(exc)

    # ---- metadata ----------------------------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> int:
        """Any thread: track these topics in metadata; returns the metadata version to wait beyond when
        something new had to be fetched, else -1."""
        new = set(topics) - self._topics
        if not new:
            return -1
        version = self.cluster.version
        self.loop.call_soon_threadsafe(self._add_topics, new)
        return version

    def _add_topics(self, topics: set[str]) -> None:
        self._topics |= topics
        self._want_metadata(f"new topics {sorted(topics)}", new_topics=True)

    def set_all_topics(self, wanted: bool) -> None:
        """Any thread: fetch every topic (pattern subscriptions) instead of the tracked ones."""
        self.loop.call_soon_threadsafe(setattr, self, "_all_topics", wanted)
        self.request_update()

    def request_update(self, reason: str = "requested") -> int:
        """Any thread: ask for fresh metadata soon; returns the current version (wait beyond it)."""
        version = self.cluster.version
        if self.loop.in_loop_thread():
            self._want_metadata(reason)
        else:
            self.loop.call_soon_threadsafe(self._want_metadata, reason)
        return version

    def _want_metadata(self, reason: str, *, new_topics: bool = False) -> None:
        # Only a new request wakes the loop: hooks that ask on every iteration must not keep it awake.
        if self.refresh.request(reason, new_topics=new_topics) and self.loop.in_loop_thread():
            self.loop.wakeup()

    def bootstrap(self, timeout: float) -> None:
        """Any thread: wait until the first metadata arrived from a bootstrap server (kafka-python connects
        at construction); KafkaTimeoutError, as kafka-python raises, when none answered within `timeout`."""
        if self.cluster.version > 0:
            return
        self.request_update()
        if not self.wait_for_metadata(0, timeout):
            raise kerrors.KafkaTimeoutError(
                f"Unable to bootstrap from {self.config.bootstrap_servers}: no broker answered within "
                f"{timeout:.1f} s{self.connection_trouble()}")

    def connection_trouble(self) -> str:
        """Why the known brokers are not connected, for error messages ('' when nothing is known)."""
        errors = {str(e) for e in (self.pool.last_error(node) for node in self._known_nodes()) if e is not None}
        return f" (last connection errors: {'; '.join(sorted(errors))})" if errors else ""

    def wait_for_metadata(self, version: int, timeout: float) -> bool:
        """Any thread: wait for a metadata update newer than `version`."""
        return self.cluster.wait_for_version(version, timeout)

    def topic_metadata(self, topic: str, timeout: float) -> Any:
        """Any thread: the topic's TopicInfo, fetching metadata (and creating the topic when the broker
        auto-creates) for up to `timeout` seconds; raises the topic's error or KafkaTimeoutError."""
        deadline = time.monotonic() + timeout
        version = self.add_topics([topic])
        if version < 0:
            version = self.cluster.version
            if topic not in self.cluster.topics:
                version = self.request_update()
        while True:
            info = self.cluster.topics.get(topic)
            if info is not None and all(p.leader >= 0 for p in info.partitions):
                return info
            error_code = self.cluster.topic_errors.get(topic)
            if error_code and error_code not in (kerrors.UnknownTopicOrPartitionError.errno,
                                                 kerrors.LeaderNotAvailableError.errno):
                raise kerrors.for_code(error_code)(f"topic {topic!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if info is not None:
                    return info
                why = (f": topic {topic!r} is {kerrors.for_code(error_code).message}" if error_code
                       else self.connection_trouble())
                raise kerrors.KafkaTimeoutError(f"Failed to update metadata after {timeout:.1f} secs{why}.")
            # Leaders are being elected or the topic is being created: the refresh schedule asks again with
            # a backoff until they are there (an answer that leaves them open counts as unresolved).
            version = self.request_update(f"waiting for topic {topic!r}")
            self.wait_for_metadata(version, remaining)

    def _maintain(self) -> float | None:
        """Poll hook: keep metadata fresh and connections coming for waiting calls; returns the longest
        the loop may sleep."""
        if self._waiting:
            self._waiting.dispatch(time.monotonic())
        # Waiting calls look for a ready node again shortly (their nodes may be in a reconnect backoff).
        limit = 0.05 if self._waiting else None
        if self._closed:
            return None
        now = time.monotonic()
        delay = self.refresh.delay(now)
        if delay is None or delay > 0:
            return _earlier(limit, delay)
        candidates = self._metadata_nodes()
        node_id = self.pool.least_loaded_node(candidates)
        if node_id is None:
            # Every node is busy (its answers wake the loop) or in a reconnect backoff: come back when the
            # first backoff ends.
            backoffs = [self.pool.connection_delay(n) for n in candidates if self.pool.is_disconnected(n)]
            return _earlier(limit, max(min(backoffs), 0.001) if backoffs else None)
        if not self.ready(node_id):
            return limit        # connecting: its state listener wakes the loop
        all_topics = self._all_topics or not self._topics
        topics = None if self._all_topics else [kp.MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(self._topics)]
        request = kp.MetadataRequest(topics=topics, allow_auto_topic_creation=self.config.allow_auto_create_topics)
        reason = self.refresh.started(now)
        _log.debug("metadata request to node %r: %s", node_id, reason)
        try:
            self.send(node_id, request, lambda response, error: self._on_metadata(response, error, all_topics))
        except Exception as exc:
            self.refresh.failed(f"the metadata request to node {node_id!r} was not sent ({exc})")
            return _earlier(limit, self.refresh.delay(now))
        return limit

    def _on_metadata(self, response: Any, error: BaseException | None, all_topics: bool) -> None:
        if error is not None:
            self.refresh.failed(f"the last metadata request failed ({error})")
            _log.debug("metadata request failed: %s", error)
            return
        for broker in response.brokers:
            self.pool.add_node(broker.node_id, broker.host, broker.port)
            self.pool.add_node(_metadata_node(broker.node_id), broker.host, broker.port)
        now = time.monotonic()
        self.cluster.update(response, now, all_topics=all_topics)
        unresolved = self._unknown_topic()
        leader_missing = unresolved is None
        if leader_missing:
            unresolved = self._leader_missing()
        self.refresh.succeeded(now, unresolved, leader_missing=leader_missing)

    def _unknown_topic(self) -> str | None:
        """A tracked topic the metadata does not know (refreshed again with a backoff until it does)."""
        cluster = self.cluster
        for name in sorted(self._topics):
            if name not in cluster.topics:
                code = cluster.topic_errors.get(name)
                return f"topic {name!r} is {kerrors.for_code(code).message if code else 'not in the metadata'}"
        return None

    def _leader_missing(self) -> str | None:
        """A partition of the tracked topics without a leader or with an unreachable one (refreshed again
        every retry_backoff_ms while the cluster elects a new one)."""
        cluster = self.cluster
        # Tracked topics; every topic only for pattern subscriptions (others may list all for other reasons).
        topics = cluster.topics.values() if self._all_topics else [
            cluster.topics[name] for name in self._topics if name in cluster.topics]
        for info in topics:
            for p in info.partitions:
                if p.leader < 0:
                    return f"{info.name}-{p.partition} has no leader"
                if self.is_failing(p.leader):
                    return f"{info.name}-{p.partition} is led by broker {p.leader}, which is unreachable"
        return None

    # ---- closing ---------------------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection and, when this client owns it, stop the loop thread."""
        if self._closed:
            return

        def shut() -> None:
            self._closed = True
            self.loop.remove_poll_hook(self._maintain)
            self._waiting.fail_all(lambda: kerrors.KafkaConnectionError("the client closed"))
            self.pool.close()

        if self.loop.running and not self.loop.in_loop_thread():
            try:
                self.loop.run_in_loop(shut, timeout=timeout)
            except Exception:
                _log.debug("closing the connections did not finish cleanly", exc_info=True)
        else:
            shut()
        self.cluster.wake()
        if self._own_loop:
            self.loop.stop()
            if not self.loop.in_loop_thread():
                self.loop.join(timeout)


def _metadata_node(broker_id: int) -> str:
    """The pool node of a broker's connection for metadata requests."""
    return f"metadata-{broker_id}"


def _earlier(limit: float | None, delay: float | None) -> float | None:
    """The shorter of two sleep limits (None: no limit)."""
    if limit is None:
        return delay
    return limit if delay is None else min(limit, delay)
