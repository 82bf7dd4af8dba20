"""pynsq's Reader / Writer API on fastmq.nsq, without tornado: pynsq users switch by changing the import.

    from fastmq.nsq import compat as nsq      # was: import nsq

Reader(topic, channel, message_handler, nsqd_tcp_addresses / lookupd_http_addresses, max_tries, max_in_flight,
lookupd_poll_interval, lookupd_poll_jitter, max_backoff_duration, **connection settings): the handler runs on the
reader's own thread, one message at a time, as pynsq runs it on its ioloop. It returns True (finish), False
(requeue), or nothing after message.enable_async() (it answers later, from any thread: message.finish() /
requeue(delay=, backoff=) / touch()); a handler that raises requeues the message. A message past max_tries goes
to giving_up() and is finished. Subclasses may override process_message, giving_up, preprocess_message and
validate_message, as with pynsq.

Writer(nsqd_tcp_addresses, **connection settings).pub / mpub / dpub(topic, ..., callback): callback(conn, data)
runs on the io thread with b"OK", or with an Error instance; conn is None (no connection object is exposed).

run() blocks until every Reader and Writer is closed or the process gets SIGINT / SIGTERM (then it closes them),
as pynsq's run() does with tornado's loop. The connection settings take pynsq's names: tls_v1 with tls_options
(ssl.wrap_socket keywords: ca_certs, certfile, keyfile, cert_reqs), snappy, deflate, deflate_level,
heartbeat_interval, output_buffer_size, output_buffer_timeout, sample_rate, user_agent, auth_secret, msg_timeout,
and the Reader's requeue_delay (seconds, times the attempts).
"""
from __future__ import annotations

import logging
import signal
import ssl
import threading
from concurrent.futures import Future
from typing import Any, Callable

from fastmq.nsq._native.codec import Message
from fastmq.nsq.connection import NSQSettings
from fastmq.nsq.consumer import Consumer
from fastmq.nsq.errors import NSQConfigurationError, NSQError
from fastmq.nsq.producer import Producer

_log = logging.getLogger(__name__)

Error = NSQError

_running: set[Any] = set()      # open Readers and Writers, for run()
_changed = threading.Condition()

# pynsq's connection keyword -> (NSQSettings field, conversion)
_SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "snappy": ("snappy", bool), "deflate": ("deflate", bool), "deflate_level": ("deflate_level", int),
    "heartbeat_interval": ("heartbeat_interval_ms", int), "output_buffer_size": ("output_buffer_size", int),
    "output_buffer_timeout": ("output_buffer_timeout_ms", int), "sample_rate": ("sample_rate", int),
    "user_agent": ("user_agent", str), "auth_secret": ("auth_secret", lambda value: value),
    "msg_timeout": ("msg_timeout_ms", int), "hostname": ("hostname", str), "client_id": ("client_id", str),
}


def _settings(options: dict[str, Any]) -> NSQSettings:
    """pynsq's connection keywords -> NSQSettings."""
    options = dict(options)
    tls_v1 = options.pop("tls_v1", False)
    tls_options = options.pop("tls_options", None) or {}
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name not in _SETTINGS:
            raise NSQConfigurationError(f"unknown option {name!r}")
        field, convert = _SETTINGS[name]
        values[field] = convert(value)
    if tls_v1:
        context = ssl.create_default_context(cafile=tls_options.get("ca_certs"))
        if tls_options.get("cert_reqs", ssl.CERT_REQUIRED) == ssl.CERT_NONE:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if tls_options.get("certfile"):
            context.load_cert_chain(tls_options["certfile"], tls_options.get("keyfile"))
        values["tls"] = context
    return NSQSettings(**values)


def _opened(client: Any) -> None:
    with _changed:
        _running.add(client)
        _changed.notify_all()


def _closed(client: Any) -> None:
    with _changed:
        _running.discard(client)
        _changed.notify_all()


class Reader:
    """pynsq's Reader (see the module docstring)."""

    def __init__(self, topic: str, channel: str, message_handler: Callable[[Message], Any] | None = None,
                 name: str | None = None, nsqd_tcp_addresses: Any = None, lookupd_http_addresses: Any = None,
                 max_tries: int = 5, max_in_flight: int = 1, lookupd_poll_interval: int = 60,
                 low_rdy_idle_timeout: int = 10, max_backoff_duration: float = 128, lookupd_poll_jitter: float = 0.3,
                 lookupd_connect_timeout: int = 1, lookupd_request_timeout: int = 2, **kwargs: Any) -> None:
        self.topic = topic
        self.channel = channel
        self.name = name or f"{topic}:{channel}"
        self.max_tries = max_tries
        self.message_handler = message_handler
        requeue_delay_s = kwargs.pop("requeue_delay", 90)       # pynsq's: a connection option, in seconds
        self._consumer = Consumer(
            topic, channel, nsqd_tcp_addresses=nsqd_tcp_addresses,
            lookupd_http_addresses=[address.removeprefix("http://") for address in
                                    ([lookupd_http_addresses] if isinstance(lookupd_http_addresses, str)
                                     else lookupd_http_addresses)] if lookupd_http_addresses else None,
            settings=_settings(kwargs), max_in_flight=max_in_flight, max_attempts=max_tries,
            on_give_up=self.giving_up, max_backoff_ms=int(max_backoff_duration * 1000),
            requeue_delay_ms=int(requeue_delay_s * 1000),
            lookupd_poll_interval_s=lookupd_poll_interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nsq-reader-{self.name}", daemon=True)
        self._thread.start()
        _opened(self)

    def set_message_handler(self, message_handler: Callable[[Message], Any]) -> None:
        self.message_handler = message_handler

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None:
                self._handle(message)

    def _handle(self, message: Message) -> None:
        try:
            processed = self.preprocess_message(message)
            if not self.validate_message(processed):
                message.finish()
                return
            result = self.process_message(processed)
        except Exception:
            _log.exception("[%s] the handler failed on %r", self.name, message)
            if not message.has_responded():
                message.requeue()
            return
        if message.is_async() or message.has_responded():
            return
        if result is None:
            _log.error("[%s] the handler returned None without enable_async(): requeued", self.name)
        if result:
            message.finish()
        else:
            message.requeue()

    def process_message(self, message: Message) -> Any:
        if self.message_handler is None:
            raise NSQConfigurationError("the Reader has no message_handler (pass one, or set_message_handler)")
        return self.message_handler(message)

    def preprocess_message(self, message: Message) -> Message:
        return message

    def validate_message(self, message: Message) -> bool:
        return True

    def giving_up(self, message: Message) -> None:
        _log.warning("[%s] giving up on message %r after %d tries", self.name, message.id, message.attempts)

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(10.0)
        self._consumer.close()
        _closed(self)


class Writer:
    """pynsq's Writer (see the module docstring)."""

    def __init__(self, nsqd_tcp_addresses: Any, reconnect_interval: float = 15.0, name: str | None = None,
                 **kwargs: Any) -> None:
        addresses = [nsqd_tcp_addresses] if isinstance(nsqd_tcp_addresses, str) else list(nsqd_tcp_addresses)
        self.name = name
        self._producer = Producer(addresses, settings=_settings(kwargs))
        _opened(self)

    def pub(self, topic: str, msg: bytes, callback: Callable[[Any, Any], Any] | None = None) -> None:
        self._reply(self._producer.publish(topic, _bytes(msg)), callback)

    def mpub(self, topic: str, msg: list[bytes], callback: Callable[[Any, Any], Any] | None = None) -> None:
        self._reply(self._producer.publish_many(topic, [_bytes(each) for each in msg]), callback)

    def dpub(self, topic: str, delay_ms: int, msg: bytes, callback: Callable[[Any, Any], Any] | None = None) -> None:
        self._reply(self._producer.publish(topic, _bytes(msg), defer_ms=delay_ms), callback)

    @staticmethod
    def _reply(future: Future[Any], callback: Callable[[Any, Any], Any] | None) -> None:
        if callback is None:
            return

        def done(finished: Future[Any]) -> None:
            error = finished.exception()
            callback(None, b"OK" if error is None else error)

        future.add_done_callback(done)

    def close(self) -> None:
        self._producer.close()
        _closed(self)


def _bytes(msg: Any) -> bytes:
    return msg.encode() if isinstance(msg, str) else bytes(msg)


def run() -> None:
    """Block until every Reader and Writer is closed; SIGINT / SIGTERM close them all (main thread only)."""
    def stop(signum: int, frame: Any) -> None:
        for client in list(_running):
            threading.Thread(target=client.close, daemon=True).start()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, stop)
    try:
        with _changed:
            while _running:
                _changed.wait(1.0)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


__all__ = ["Error", "Message", "Reader", "Writer", "run"]
