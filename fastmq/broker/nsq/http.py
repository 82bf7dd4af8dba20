"""The HTTP side of the broker's NSQ: nsqd's API on `nsq-http` listeners, nsqlookupd's on `nsqlookupd-http` ones.

nsqd: POST /pub?topic=T[&defer=ms][&partition=N] (body: the message), POST /mpub?topic=T[&binary=true] (body:
messages one per line, or MPUB's binary layout), POST /topic/create (Youzan's [&partition_num=N]
[&orderedmulti=true] [&extend=true] too, as its lookupd takes them), /topic/delete, /channel/create,
/channel/delete ?topic=&channel=, GET /ping ("OK"), /info, /stats?format=json[&topic=][&channel=].
nsqlookupd: GET /lookup?topic=T[&access=r|w][&metainfo=true][&partition=N] -> producers (every nsq listener of
this broker) and, as Youzan's lookupd, "partitions" (partition number -> the same node) and with metainfo "meta";
/listlookup (this lookupd alone), /topics, /channels?topic=, /nodes, /ping, /info.
With the header "Accept: application/vnd.nsq; version=1.0" answers are bare JSON, else wrapped in
{"status_code", "status_txt", "data"} as nsq's v0 API; errors are {"message": "..."} with their status.

Each listener is a ThreadingHTTPServer on its own thread (HTTP is the control path here); the work runs on the
broker's I/O loop through run_in_loop, so the core stays single-threaded.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable, cast

from fastmq.broker.frontends import FrontEnd
from fastmq.broker.nsq.channels import DEFER_PROPERTY, MAX_DEFER_MS
from fastmq.errors import FastMQError, ProtocolError
from fastmq.nsq._native import codec

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker
    from fastmq.broker.config import ListenerConfig
    from fastmq.broker.nsq.frontend import NSQFrontEnd

_log = logging.getLogger(__name__)

MAX_BODY = 5 * 1024 * 1024
V1 = "application/vnd.nsq; version=1.0"
VERSION = "1.3.0"


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NSQHTTPFrontEnd(FrontEnd):
    """Every `nsq-http` or `nsqlookupd-http` listener (one front end per protocol name, both this class)."""

    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.servers: list[ThreadingHTTPServer] = []
        self.is_lookupd = listeners[0].protocol == "nsqlookupd-http"

    def start(self) -> None:
        for listener in self.listeners:
            server = ThreadingHTTPServer((listener.host, listener.port), _handler_class(self))
            server.daemon_threads = True
            self.servers.append(server)
            threading.Thread(target=server.serve_forever, name=f"fastmq-{listener.protocol}", daemon=True).start()
            # An AF_INET server's address is (host, port); the type covers every address family.
            self.addresses.append(cast(tuple[str, int], server.server_address[:2]))

    def close(self) -> None:
        for server in self.servers:
            threading.Thread(target=lambda s=server: (s.shutdown(), s.server_close()), daemon=True).start()

    @property
    def nsq(self) -> NSQFrontEnd:
        # The front end registered for "nsq" is an NSQFrontEnd (front_end() is typed by the base class).
        return cast("NSQFrontEnd", self.broker.front_end("nsq"))

    def on_loop(self, work: Callable[[], Any]) -> Any:
        return self.broker.loop.run_in_loop(work, timeout=30)

    # ---- nsqd ----------------------------------------------------------------------------------------

    def nsqd_api(self, method: str, path: str, query: dict[str, str], body: bytes) -> Any:
        nsq = self.nsq
        if path == "/ping":
            return b"OK"
        if path == "/info":
            return self._info()
        if path == "/stats":
            return self.on_loop(lambda: self._stats(query.get("topic"), query.get("channel")))
        topic = query.get("topic", "")
        if path in ("/pub", "/mpub", "/topic/create", "/topic/delete", "/channel/create", "/channel/delete"):
            if method != "POST":
                raise HTTPError(405, "METHOD_NOT_ALLOWED")
            if not codec.is_valid_name(topic):
                raise HTTPError(400, "INVALID_TOPIC" if topic else "MISSING_ARG_TOPIC")
        if path == "/pub":
            if not body:
                raise HTTPError(400, "MSG_EMPTY")
            partition = _partition(query)
            defer = query.get("defer")
            properties = None
            if defer is not None:
                delay = int(defer)
                if not 0 <= delay <= MAX_DEFER_MS:
                    raise HTTPError(400, f"INVALID_DEFER {delay} out of range 0-{MAX_DEFER_MS}")
                properties = {DEFER_PROPERTY: str(int(time.time() * 1000) + delay)}
            self.on_loop(lambda: nsq.append(topic, nsq.partition_to_publish(topic, partition), [body], properties))
            return b"OK"
        if path == "/mpub":
            try:
                messages = (codec.split_multi(body) if query.get("binary") in ("true", "1")
                            else [line for line in body.split(b"\n") if line])
            except ProtocolError as exc:
                raise HTTPError(400, f"INVALID_BODY {exc}") from None
            if not messages:
                raise HTTPError(400, "MSG_EMPTY")
            partition = _partition(query)
            self.on_loop(lambda: nsq.append(topic, nsq.partition_to_publish(topic, partition), messages))
            return b"OK"
        if path == "/topic/create":
            self.on_loop(lambda: self._create_topic(topic, query))
            return b""
        if path == "/topic/delete":
            self.on_loop(lambda: self.broker.topics.delete(topic))
            return b""
        channel = query.get("channel", "")
        if path in ("/channel/create", "/channel/delete"):
            if not codec.is_valid_name(channel):
                raise HTTPError(400, "INVALID_CHANNEL" if channel else "MISSING_ARG_CHANNEL")
            if path == "/channel/create":
                self.on_loop(lambda: nsq.channel(topic, channel))
            else:
                self.on_loop(lambda: nsq.delete_channel(topic, channel))
            return b""
        raise HTTPError(404, "NOT_FOUND")

    def _create_topic(self, name: str, query: dict[str, str]) -> None:
        # Youzan's creation arguments: partition_num, orderedmulti=true for an ordered topic, extend=true for an
        # ext topic.
        partitions = int(query["partition_num"]) if "partition_num" in query else None
        self.nsq.create_topic(name, partitions, ordered=query.get("orderedmulti") in ("true", "1"),
                              ext=query.get("extend") in ("true", "1"))

    def _info(self) -> dict[str, Any]:
        host, port = self._tcp_address()
        return {"version": VERSION, "broadcast_address": host, "hostname": host, "tcp_port": port,
                "http_port": self._http_port(), "start_time": 0}

    def _stats(self, topic_filter: str | None, channel_filter: str | None) -> dict[str, Any]:
        nsq = self.nsq
        topics = []
        for topic in self.broker.topics.all():
            if topic_filter and topic.name != topic_filter:
                continue
            store = self.broker.store
            depth = sum(store.get_max_offset(topic.name, p) - store.get_min_offset(topic.name, p)
                        for p in range(topic.partitions))
            channels = [{"channel_name": name, "depth": channel.depth(), "in_flight_count": len(channel.in_flight),
                         "deferred_count": len(channel.delayed), "clients": [
                             {"ready_count": sub.rdy, "in_flight_count": sub.in_flight}
                             for sub in channel.subscribers]}
                        for name, channel in nsq.channels.get(topic.name, {}).items()
                        if not channel_filter or name == channel_filter]
            topics.append({"topic_name": topic.name, "depth": depth, "message_count": depth, "channels": channels,
                           "paused": False})
        return {"version": VERSION, "health": "OK", "start_time": 0, "topics": topics, "producers": []}

    # ---- nsqlookupd ----------------------------------------------------------------------------------

    def _tcp_address(self) -> tuple[str, int]:
        for listener, address in self.broker.listeners:
            if listener.protocol == "nsq":
                return listener.advertised(address)
        raise HTTPError(500, "NO_NSQD_LISTENER")

    def _http_port(self) -> int:
        for listener, address in self.broker.listeners:
            if listener.protocol == "nsq-http":
                return listener.advertised(address)[1]
        return 0

    def _peer(self) -> dict[str, Any]:
        host, port = self._tcp_address()
        return {"remote_address": f"{host}:{port}", "hostname": host, "broadcast_address": host, "tcp_port": port,
                "http_port": self._http_port(), "version": VERSION, "id": f"{host}:{port}",
                "distributed_id": f"{host}:{port}"}

    def lookupd_api(self, method: str, path: str, query: dict[str, str], body: bytes) -> Any:
        if path == "/ping":
            return b"OK"
        if path == "/info":
            return {"version": VERSION}
        if path == "/topics":
            return {"topics": sorted(topic.name for topic in self.broker.topics.all())}
        if path == "/nodes":
            return {"producers": [dict(self._peer(), topics=sorted(t.name for t in self.broker.topics.all()))]}
        if path == "/listlookup":
            host, _ = self._tcp_address()
            port = self.addresses[0][1]
            node = {"ID": f"{host}:{port}", "NodeIP": host, "TcpPort": "", "HttpPort": str(port), "RpcPort": "",
                    "Epoch": 0}
            return {"lookupdnodes": [node], "lookupdleader": node}
        topic_name = query.get("topic", "")
        if path in ("/lookup", "/channels"):
            if not topic_name:
                raise HTTPError(400, "MISSING_ARG_TOPIC")
            topic = self.broker.topics.get(topic_name)
            if topic is None:
                raise HTTPError(404, "TOPIC_NOT_FOUND")
            channels = sorted(self.nsq.channels.get(topic_name, {}))
            if path == "/channels":
                return {"channels": channels}
            peer = self._peer()
            wanted = query.get("partition")
            numbers = range(topic.partitions) if wanted is None else [int(wanted)]
            answer: dict[str, Any] = {"channels": channels, "producers": [peer],
                                      "partitions": {str(number): peer for number in numbers
                                                     if 0 <= number < topic.partitions}}
            if query.get("metainfo") in ("true", "1"):
                answer["meta"] = {"partition_num": topic.partitions, "replica": 1,
                                  "extend_support": self.nsq.is_ext(topic), "ordered": self.nsq.is_ordered(topic),
                                  "multi_part": topic.partitions > 1, "disable_channel_auto_create": False}
            return answer
        raise HTTPError(404, "NOT_FOUND")


def _content_length(value: str | None) -> int | None:
    """The header's byte count (0 when absent); None when it is no count (negative, or not a decimal number)."""
    if value is None:
        return 0
    value = value.strip()
    return int(value) if value.isdecimal() and value.isascii() else None


def _partition(query: dict[str, str]) -> int | None:
    return int(query["partition"]) if "partition" in query else None


def _handler_class(front: NSQHTTPFrontEnd) -> type[BaseHTTPRequestHandler]:
    route = front.lookupd_api if front.is_lookupd else front.nsqd_api

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = f"fastmq-nsq/{VERSION}"

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = {key: values[-1] for key, values in urllib.parse.parse_qs(url.query).items()}
            v1 = V1 in (self.headers.get("Accept") or "")
            try:
                length = _content_length(self.headers.get("Content-Length"))
                if length is None:
                    # The body's end is unknown: whatever follows cannot be read as the next request.
                    self.close_connection = True
                    raise HTTPError(400, "INVALID_CONTENT_LENGTH")
                if length > MAX_BODY:
                    self.close_connection = True
                    raise HTTPError(413, "MSG_TOO_BIG")
                body = self.rfile.read(length) if length else b""
                result = route(method, url.path, query, body)
                status = 200
            except HTTPError as exc:
                status, result = exc.status, {"message": str(exc)}
            except (FastMQError, ValueError) as exc:
                status, result = 400, {"message": str(exc)}
            self._send(status, result, v1)

        def _send(self, status: int, result: Any, v1: bool) -> None:
            if isinstance(result, bytes) and status == 200:
                data, kind = result, "text/plain; charset=utf-8"
            else:
                if not v1:
                    failed = status != 200
                    result = {"status_code": status, "status_txt": result["message"] if failed else "OK",
                              "data": None if failed else result}
                data, kind = json.dumps(result).encode(), "application/json; charset=utf-8"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("%s %s", self.address_string(), format % args)

    return Handler
