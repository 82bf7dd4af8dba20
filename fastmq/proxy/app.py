"""The proxy's ASGI application: /produce, /message, /ack, /nack for clients, /admin/* and the page for people,
/openapi.json, /metrics and /healthz for machines.

A /message costs one Redis round trip (choose+lock, which also takes the piggy-backed ack of the previous
token and the consumer's rate limit) and one pull from the broker; /ack one round trip. The queues' end offsets
that choose+lock needs come from this process' cache (refreshed from the broker at most every
bounds_max_age_s, updated by every pull and produce), so they cost no round trip on the hot path.
"""
from __future__ import annotations

import asyncio
import base64
import hmac
import itertools
import logging
import math
import time
from typing import Any, Awaitable, Callable

import orjson

from fastmq.client.ratelimit import RateLimiter
from fastmq.proxy import admin, openapi, page
from fastmq.proxy.backend import Backend, BackendError, OutgoingMessages, PulledMessage
from fastmq.proxy.config import BROADCAST, ConsumerConfig, ProducerConfig, ProxyConfig
from fastmq.proxy.http import HttpError, Receive, Reply, Request, Send, read_request
from fastmq.proxy.metrics import Metrics
from fastmq.proxy.parsing import parse_ack, parse_produce, parse_pull
from fastmq.proxy.registry import Registry
from fastmq.proxy.state import ACK_OK, ConsumerState, Lock

_log = logging.getLogger(__name__)

POLL_S = 0.05                 # how often a long-poll looks for new messages
MAX_CHOICES = 64              # locks one /message may take (skipping dead letters and empty ranges)
MAX_NACK_DELAY_MS = 24 * 3600 * 1000


class ProxyApp:
    """The ASGI app; `redis` (a redis.asyncio client) is made from config.redis_url at startup when not given."""

    def __init__(self, config: ProxyConfig, backend: Backend, redis: Any = None) -> None:
        self.config = config
        self.backend = backend
        self.redis = redis
        self._state: ConsumerState | None = None      # both made at startup (they need the redis client)
        self._registry: Registry | None = None
        self.metrics = Metrics()
        self.metrics.gauges["fastmq_proxy_redis_round_trips_total"] = self.redis_round_trips
        self.metrics.gauges["fastmq_proxy_broker_requests_total"] = lambda: getattr(backend, "broker_requests", 0)
        self.closing = False
        self._rotate = itertools.count()
        self._producer_limits: dict[str, RateLimiter] = {}
        self._request_labels: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}
        self.routes: dict[tuple[str, str], Callable[[ProxyApp, Request], Awaitable[Reply]]] = {
            ("POST", "/produce"): ProxyApp.produce,
            ("GET", "/message"): ProxyApp.message,
            ("POST", "/ack"): ProxyApp.ack,
            ("POST", "/nack"): ProxyApp.nack,
            ("GET", "/healthz"): ProxyApp.health,
            ("GET", "/metrics"): ProxyApp.serve_metrics,
            ("GET", "/openapi.json"): openapi.serve,
            ("GET", "/"): page.serve,
        }

    @property
    def state(self) -> ConsumerState:
        if self._state is None:
            raise RuntimeError("the proxy is not started")
        return self._state

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            raise RuntimeError("the proxy is not started")
        return self._registry

    def redis_round_trips(self) -> int:
        return ((self._state.round_trips if self._state else 0)
                + (self._registry.round_trips if self._registry else 0))

    # ---- ASGI ----------------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[Any, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:
                    _log.exception("the proxy could not start")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def start(self) -> None:
        if self.redis is None:
            import redis.asyncio as aioredis
            self.redis = aioredis.from_url(self.config.redis_url)
        await self.redis.ping()
        self._state = ConsumerState(self.redis, self.config.namespace)
        self._registry = Registry(self.config, self.redis)
        for consumer in self.config.consumers.values():
            if consumer.rate > 0:
                await self.state.set_rate(consumer.name, consumer.rate, consumer.burst)
        await self.backend.start()
        _log.info("proxy started: redis %s, namespace %s", self.config.redis_url, self.config.namespace)

    async def stop(self) -> None:
        """Long polls answer at once; what the producer holds is sent; then Redis is closed."""
        self.closing = True
        await self.backend.stop()
        if self._state is not None:
            self._state.close()
        await self.redis.aclose()
        _log.info("proxy stopped")

    async def _http(self, scope: dict[Any, Any], receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        method, path = scope["method"], scope["path"]
        handler = self.routes.get((method, path))
        route = path if handler is not None else ("/admin" if path.startswith("/admin/") else "other")
        try:
            if handler is None and path.startswith("/admin/"):
                handler = admin.route(method, path)
            if handler is None:
                known = any(p == path for _, p in self.routes)
                raise HttpError(405 if known else 404, "method_not_allowed" if known else "not_found",
                                f"{method} {path} is not served (see /openapi.json)")
            request = await read_request(scope, receive, self.config.max_body_bytes)
            reply = await handler(self, request)
        except HttpError as error:
            reply = Reply(error.status, {"ok": False, "error": error.code, "message": error.message}, headers=error.headers)
        except BackendError as error:
            status, code = ((404, "unknown_topic") if error.unknown_topic else
                            (400, "bad_message") if error.bad_message else (502, "broker_error"))
            reply = Reply(status, {"ok": False, "error": code, "message": str(error)})
        except ConnectionAbortedError:
            return
        except Exception:
            _log.exception("%s %s failed", method, path)
            reply = Reply(500, {"ok": False, "error": "internal", "message": "the proxy failed; see its log"})
        try:
            await reply.send(send)
        except OSError:
            return
        labels = self._request_labels.get((route, reply.status))
        if labels is None:          # routes and statuses are few: their labels are made once
            labels = self._request_labels[(route, reply.status)] = (("route", route), ("status", str(reply.status)))
        self.metrics.add("fastmq_proxy_requests_total", labels)
        self.metrics.add("fastmq_proxy_request_seconds_total", labels[:1], time.perf_counter() - started)

    # ---- who asks ------------------------------------------------------------------------------------------

    @staticmethod
    def _authorize(entry: ProducerConfig | ConsumerConfig, request: Request) -> None:
        if entry.token is None:
            return
        given = request.bearer_token()
        if given is None or not hmac.compare_digest(given.encode(), entry.token.encode()):
            raise HttpError(401, "bad_token", f"{entry.name!r} needs its token: Authorization: Bearer <token>",
                            {"www-authenticate": "Bearer"})

    async def _producer(self, request: Request, name: str) -> ProducerConfig:
        producer = await self.registry.producer(name)
        if producer is None:
            raise HttpError(404, "unknown_producer", f"no producer {name!r} is registered (config file or "
                                                     "POST /admin/producers)")
        self._authorize(producer, request)
        return producer

    async def _consumer(self, request: Request, name: str, topic: str | None, client_id: str | None
                        ) -> tuple[ConsumerConfig, str, str | None]:
        """The consumer, its topic, and the clientId its state is kept under (None for cluster consumers)."""
        consumer = await self.registry.consumer(name)
        if consumer is None:
            raise HttpError(404, "unknown_consumer", f"no consumer {name!r} is registered (config file or "
                                                     "POST /admin/consumers)")
        self._authorize(consumer, request)
        if topic is not None and topic != consumer.topic:
            raise HttpError(403, "wrong_topic", f"consumer {name!r} consumes {consumer.topic!r}, not {topic!r}")
        if consumer.mode == BROADCAST and client_id is None:
            raise HttpError(400, "missing_parameter", f"consumer {name!r} is a broadcast consumer: give clientId")
        return consumer, consumer.topic, client_id if consumer.mode == BROADCAST else None

    # ---- produce -------------------------------------------------------------------------------------------

    async def produce(self, request: Request) -> Reply:
        asked = parse_produce(request, self.config.max_messages_per_produce)
        producer = await self._producer(request, asked.producer)
        if asked.topic is not None and asked.topic != producer.topic:
            raise HttpError(403, "wrong_topic", f"producer {producer.name!r} produces to {producer.topic!r} only")
        if producer.rate > 0:
            limiter = self._producer_limits.get(producer.name)
            if limiter is None or limiter.rate != producer.rate:
                limiter = self._producer_limits[producer.name] = RateLimiter(producer.rate)
            if limiter.available() < 1:
                raise _limited(limiter.wait_for(1) * 1000, f"producer {producer.name!r}")
            limiter.take(1)
        sent = await self.backend.produce(producer.topic, asked.messages)
        self.metrics.add("fastmq_proxy_messages_produced_total", (("topic", producer.topic),), sent.count)
        return Reply(200, {"ok": True, "topic": producer.topic, "results": orjson.Fragment(sent.results)})

    # ---- consume -------------------------------------------------------------------------------------------

    async def message(self, request: Request) -> Reply:
        asked = parse_pull(request, self.config.max_messages_per_pull, self.config.max_wait_ms)
        consumer, topic, client = await self._consumer(request, asked.consumer, asked.topic, asked.client_id)
        deadline = time.monotonic() + asked.wait_ms / 1000.0
        ack, ack_verdict = asked.ack, None
        max_age = self.config.bounds_max_age_s
        for _ in range(MAX_CHOICES):
            bounds = await self.backend.queues(topic, max_age)
            verdict, choice = await self.state.choose(
                consumer.name, topic, client, bounds, lease_ms=consumer.lease_ms, start=consumer.start,
                rotate=next(self._rotate), ttl_ms=consumer.client_ttl_ms if client is not None else 0, ack=ack)
            if ack is not None:
                assert verdict is not None          # choose() answers the ack it was given
                ack_verdict, ack = verdict, None
                self.metrics.add("fastmq_proxy_acks_total", (("consumer", consumer.name), ("verdict", verdict)))
            if choice.outcome == "limited":
                raise _limited(choice.retry_after_ms, f"consumer {consumer.name!r}")
            if choice.outcome == "locked":
                assert choice.lock is not None      # a locked outcome carries its lock
                reply = await self._deliver(consumer, topic, client, choice.lock, asked.max_messages, ack_verdict)
                if reply is not None:
                    return reply
                continue
            remaining = deadline - time.monotonic()
            if choice.outcome == "paused" or remaining <= 0 or self.closing:
                return Reply(200, {"ok": True, "status": choice.outcome, "messages": [], "token": None,
                                   "ack": ack_verdict})
            await asyncio.sleep(min(POLL_S, remaining))
            max_age = POLL_S
        return Reply(200, {"ok": True, "status": "empty", "messages": [], "token": None, "ack": ack_verdict})

    async def _deliver(self, consumer: ConsumerConfig, topic: str, client: str | None, lock: Lock,
                       max_messages: int, ack_verdict: str | None) -> Reply | None:
        """Pull what the lock covers and answer it; None when there was nothing to hand out (the lock is let go
        or acked here: a dead letter moved, or a range of no messages passed over)."""
        if lock.attempts > consumer.max_attempts:
            await self._dead_letter(consumer, topic, client, lock)
            return None
        try:
            pulled = await self.backend.pull(topic, lock.queue, lock.offset, max_messages, self.config.max_pull_bytes)
        except BackendError:
            await self.state.nack(consumer.name, topic, client, lock.token(lock.offset), lease_ms=consumer.lease_ms,
                                  delay_ms=0)
            raise
        if not pulled.messages:
            if pulled.next_offset > lock.offset:          # transaction markers only: pass over them
                await self.state.ack(consumer.name, topic, client, lock.token(pulled.next_offset),
                                     lease_ms=consumer.lease_ms)
                return None
            # The broker has nothing there yet (its end offset was ahead of what it serves): try later.
            await self.state.nack(consumer.name, topic, client, lock.token(lock.offset),
                                  lease_ms=consumer.lease_ms, delay_ms=int(POLL_S * 1000))
            return Reply(200, {"ok": True, "status": "empty", "messages": [], "token": None, "ack": ack_verdict})
        self.metrics.add("fastmq_proxy_messages_delivered_total", (("consumer", consumer.name),),
                         len(pulled.messages))
        return Reply(200, {
            "ok": True, "status": "locked", "queue": lock.queue, "token": str(lock.token(pulled.next_offset)),
            "attempt": lock.attempts, "lease_ms": consumer.lease_ms, "backlog": max(0, pulled.high - pulled.next_offset),
            "ack": ack_verdict, "messages": [_message_json(m) for m in pulled.messages]})

    async def _dead_letter(self, consumer: ConsumerConfig, topic: str, client: str | None, lock: Lock) -> None:
        """The message at the lock's offset was handed out max_attempts times: move it to the dead-letter topic
        (with where it came from in headers) and commit past it."""
        pulled = await self.backend.pull(topic, lock.queue, lock.offset, 1, self.config.max_pull_bytes)
        if pulled.messages:
            m = pulled.messages[0]
            origin = [("fastmq-origin", f"{topic}:{lock.queue}:{m.offset}".encode()),
                      ("fastmq-attempts", str(lock.attempts - 1).encode())]
            await self.backend.produce(consumer.dead_letters, OutgoingMessages(
                [m.value or b""], [m.key], [[(k, v or b"") for k, v in m.headers] + origin]))
            self.metrics.add("fastmq_proxy_dead_letters_total", (("consumer", consumer.name),))
            _log.warning("consumer %s: %s:%s offset %d moved to %s after %d attempts", consumer.name, topic,
                         lock.queue, m.offset, consumer.dead_letters, lock.attempts - 1)
        next_offset = pulled.messages[0].offset + 1 if pulled.messages else pulled.next_offset
        await self.state.ack(consumer.name, topic, client, lock.token(max(next_offset, lock.offset)),
                             lease_ms=consumer.lease_ms)

    async def ack(self, request: Request) -> Reply:
        asked = parse_ack(request, MAX_NACK_DELAY_MS)
        consumer, topic, client = await self._consumer(request, asked.consumer, asked.topic, asked.client_id)
        verdict = await self.state.ack(consumer.name, topic, client, asked.token, lease_ms=consumer.lease_ms)
        self.metrics.add("fastmq_proxy_acks_total", (("consumer", consumer.name), ("verdict", verdict)))
        return _verdict_reply(verdict, "ack")

    async def nack(self, request: Request) -> Reply:
        asked = parse_ack(request, MAX_NACK_DELAY_MS)
        consumer, topic, client = await self._consumer(request, asked.consumer, asked.topic, asked.client_id)
        verdict = await self.state.nack(consumer.name, topic, client, asked.token, lease_ms=consumer.lease_ms,
                                        delay_ms=asked.delay_ms)
        return _verdict_reply(verdict, "nack")

    # ---- for machines --------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Reply:
        return Reply(503 if self.closing else 200, {"ok": not self.closing})

    async def serve_metrics(self, request: Request) -> Reply:
        return Reply(200, body=self.metrics.render().encode(), content_type="text/plain; version=0.0.4")


def _limited(retry_after_ms: float, who: str) -> HttpError:
    seconds = max(1, math.ceil(retry_after_ms / 1000))
    return HttpError(429, "rate_limited", f"{who} is over its rate limit; retry after {seconds} s",
                     {"retry-after": str(seconds)})


def _verdict_reply(verdict: str, what: str) -> Reply:
    if verdict == ACK_OK:
        return Reply(200, {"ok": True})
    why = ("its lock is gone (the lease ran out, or it was acked already): the messages will be delivered again"
           if verdict == "expired" else "the queue moved on since (another lock delivered these messages)")
    return Reply(409, {"ok": False, "error": f"{what}_{verdict}", "message": f"the {what} was refused: {why}"})


def _bytes_json(value: bytes | None, name: str, binary: list[str]) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        binary.append(name)
        return base64.b64encode(value).decode()


def _message_json(message: PulledMessage) -> dict[str, Any]:
    """Text stays text; bytes that are not UTF-8 are base64, and `binary` names those fields."""
    binary: list[str] = []
    encoded: dict[str, Any] = {"offset": message.offset, "timestamp": message.timestamp,
               "key": _bytes_json(message.key, "key", binary), "value": _bytes_json(message.value, "value", binary),
               "headers": {name: _bytes_json(value, f"headers.{name}", binary) for name, value in message.headers}}
    if binary:
        encoded["binary"] = binary
    return encoded
