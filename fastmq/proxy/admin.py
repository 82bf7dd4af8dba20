"""The admin API (seed 001's MQCloud part): registering producers and consumers, a consumer's progress and backlog
per queue, pause / resume, offset resets (earliest, latest, a time) and rate limits. With an admin_token in the
config, every call needs `Authorization: Bearer <admin_token>`.

    GET    /admin/producers                 POST /admin/producers {name, topic, token?, rate?}
    DELETE /admin/producers/NAME
    GET    /admin/consumers                 POST /admin/consumers {name, topic, mode?, lease_ms?, ...}
    GET    /admin/consumers/NAME            settings, paused, rate, queues with backlog (per clientId if broadcast)
    DELETE /admin/consumers/NAME            unregister (its progress stays unless ?progress=drop)
    POST   /admin/consumers/NAME/pause      POST /admin/consumers/NAME/resume
    POST   /admin/consumers/NAME/reset      {to: "earliest" | "latest" | time in ms, clientId?}
    POST   /admin/consumers/NAME/rate       {rate, burst?}
"""
from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from fastmq.proxy.config import (
    BROADCAST, ConfigError, ConsumerConfig, ProducerConfig, consumer_from_dict, producer_from_dict,
)
from fastmq.proxy.http import HttpError, Reply, Request
from fastmq.proxy.parsing import name_param
from fastmq.proxy.state import START_EARLIEST, queue_order

if TYPE_CHECKING:
    from fastmq.proxy.app import ProxyApp

Handler = Callable[["ProxyApp", Request], Awaitable[Reply]]


def authorize(app: ProxyApp, request: Request) -> None:
    wanted = app.config.admin_token
    if wanted is None:
        return
    given = request.bearer_token()
    if given is None or not hmac.compare_digest(given.encode(), wanted.encode()):
        raise HttpError(401, "bad_token", "the admin API needs Authorization: Bearer <admin_token>",
                        {"www-authenticate": "Bearer"})


def route(method: str, path: str) -> Handler | None:
    parts = path.strip("/").split("/")
    if len(parts) < 2 or parts[0] != "admin" or parts[1] not in ("producers", "consumers"):
        return None
    kind = parts[1][:-1]
    if len(parts) == 2:
        return {"GET": _listing(kind), "POST": _register(kind)}.get(method)
    name = parts[2]
    if len(parts) == 3:
        return {"DELETE": _unregister(kind, name), "GET": _described(name) if kind == "consumer" else None}.get(method)
    if len(parts) == 4 and kind == "consumer" and method == "POST":
        return {"pause": _paused(name, True), "resume": _paused(name, False), "reset": _reset(name),
                "rate": _rate(name)}.get(parts[3])
    return None


def _guarded(handler: Callable[[ProxyApp, Request], Awaitable[Reply]]) -> Handler:
    async def guarded(app: ProxyApp, request: Request) -> Reply:
        authorize(app, request)
        return await handler(app, request)
    return guarded


def _listing(kind: str) -> Handler:
    async def listing(app: ProxyApp, request: Request) -> Reply:
        entries: Mapping[str, ProducerConfig | ConsumerConfig] = await (
            app.registry.producers() if kind == "producer" else app.registry.consumers())
        return Reply(200, {"ok": True, f"{kind}s": [entry.public() for _, entry in sorted(entries.items())]})
    return _guarded(listing)


def _register(kind: str) -> Handler:
    async def register(app: ProxyApp, request: Request) -> Reply:
        body = request.json()
        name = name_param(body.pop("name", None), "name")
        try:
            entry = (producer_from_dict if kind == "producer" else consumer_from_dict)(name, body)
            await app.registry.register(entry)
            if isinstance(entry, ConsumerConfig) and entry.rate > 0:
                await app.state.set_rate(entry.name, entry.rate, entry.burst)
        except ConfigError as exc:
            raise HttpError(400, "bad_registration", str(exc)) from None
        return Reply(201, {"ok": True, kind: entry.public()})
    return _guarded(register)


def _unregister(kind: str, name: str) -> Handler:
    async def unregister(app: ProxyApp, request: Request) -> Reply:
        consumer = await app.registry.consumer(name) if kind == "consumer" else None
        if not await app.registry.unregister(kind, name):
            raise HttpError(404, f"unknown_{kind}", f"no {kind} {name!r} is registered through the admin API")
        if consumer is not None and request.query.get("progress") == "drop":
            await app.state.delete(name, consumer.topic)
        return Reply(200, {"ok": True})
    return _guarded(unregister)


async def _known_consumer(app: ProxyApp, name: str) -> ConsumerConfig:
    consumer = await app.registry.consumer(name)
    if consumer is None:
        raise HttpError(404, "unknown_consumer", f"no consumer {name!r} is registered")
    return consumer


async def describe(app: ProxyApp, consumer: ConsumerConfig) -> dict[str, Any]:
    """A consumer's settings, control and progress per queue (per clientId when broadcast). End offsets are the
    broker's latest where the state's are older; a queue no client asked for yet shows where it would start."""
    live = {b.queue: b for b in await app.backend.queues(consumer.topic, app.config.bounds_max_age_s)}
    clients: list[str | None] = ([*await app.state.clients(consumer.name, consumer.topic)]
                                 if consumer.mode == BROADCAST else [None])
    control = await app.state.control(consumer.name)
    progress = []
    for client in clients:
        known = {q.queue: q for q in await app.state.progress(consumer.name, consumer.topic, client)}
        for queue in sorted(set(known) | set(live), key=queue_order):
            bound, state = live.get(queue), known.get(queue)
            high = max(state.max if state else 0, bound.high if bound else 0)
            if state is not None:
                committed = state.committed
            else:
                assert bound is not None            # the queue is known to the state or to the broker
                committed = bound.low if consumer.start == START_EARLIEST else bound.high
            backlog = max(0, high - committed)
            progress.append({"clientId": client, "queue": queue, "max": high, "committed": committed,
                             "backlog": backlog, "alert": backlog >= consumer.backlog_alert,
                             "locked": bool(state and state.locked), "lock": state.lock if state else 0,
                             "attempts": state.attempts if state else 0, "access": state.access if state else 0})
    return {"consumer": consumer.public(), "paused": control.get("paused") == "1",
            "rate": float(control.get("rate") or 0), "queues": progress,
            "backlog": sum(q["backlog"] for q in progress)}


def _described(name: str) -> Handler:
    async def described(app: ProxyApp, request: Request) -> Reply:
        return Reply(200, {"ok": True, **await describe(app, await _known_consumer(app, name))})
    return _guarded(described)


def _paused(name: str, paused: bool) -> Handler:
    async def pause(app: ProxyApp, request: Request) -> Reply:
        await _known_consumer(app, name)
        await app.state.set_paused(name, paused)
        return Reply(200, {"ok": True, "paused": paused})
    return _guarded(pause)


def _reset(name: str) -> Handler:
    async def reset(app: ProxyApp, request: Request) -> Reply:
        consumer = await _known_consumer(app, name)
        body = request.json()
        to = body.get("to")
        client = name_param(body.get("clientId"), "clientId", required=False)
        if consumer.mode == BROADCAST and client is None:
            raise HttpError(400, "missing_parameter", "a broadcast consumer is reset per clientId: give clientId")
        bounds = await app.backend.queues(consumer.topic, 0.0)
        if to == "earliest":
            offsets = {b.queue: b.low for b in bounds}
        elif to == "latest":
            offsets = {b.queue: b.high for b in bounds}
        elif isinstance(to, int) and not isinstance(to, bool) and to >= 0:
            offsets = await app.backend.offsets_for_time(consumer.topic, to)
        else:
            raise HttpError(400, "bad_parameter", f"to must be 'earliest', 'latest' or a time in ms, not {to!r}")
        await app.state.reset(name, consumer.topic, client, offsets)
        return Reply(200, {"ok": True, "offsets": offsets})
    return _guarded(reset)


def _rate(name: str) -> Handler:
    async def rate(app: ProxyApp, request: Request) -> Reply:
        await _known_consumer(app, name)
        body = request.json()
        value, burst = body.get("rate"), body.get("burst", 0)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in (value, burst)):
            raise HttpError(400, "bad_parameter", "rate and burst must be numbers >= 0 (rate 0: unlimited)")
        await app.state.set_rate(name, value, burst)
        return Reply(200, {"ok": True, "rate": value, "burst": burst})
    return _guarded(rate)
