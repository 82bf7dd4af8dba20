"""The proxy over HTTP, `fastmq proxy` processes against the session's embedded broker and Redis: clients in other
languages (curl, Node.js's fetch), produce formats, acks and leases, nack and dead letters, broadcast, the admin
API and the page, and clear 4xx answers to bad input."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.proxy.client import ProxyClient


def consume_offsets(client: ProxyClient, consumer: str, offsets: set[int], **query) -> dict[int, dict]:
    """Consume and ack until the messages at `offsets` came (bounded in rounds); returns them by offset."""
    got: dict[int, dict] = {}
    for _ in range(50):
        if offsets <= set(got):
            break
        answer = client.message(consumer, wait_ms=1000, max=50, **query).json
        got.update((m["offset"], m) for m in answer["messages"])
        if answer["token"]:
            assert client.ack(consumer, answer["token"], **query).status == 200
    assert offsets <= set(got), f"{consumer} got offsets {sorted(got)}, not all of {sorted(offsets)}"
    return got


def curl(*args: str, data: bytes | None = None) -> dict:
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed: apt-get install -y curl")
    done = subprocess.run(["curl", "-sS", "--max-time", "15", *args], input=data, capture_output=True, check=True,
                          timeout=20)
    return json.loads(done.stdout)


def test_curl_produces_text_json_base64_and_binary_and_consumes_them(proxies):
    base = f"http://127.0.0.1:{proxies.ports[0]}"
    text = curl("-X", "POST", f"{base}/produce?producer=http-writer&key=k1", "-H", "content-type: text/plain",
                "-H", "x-message-header-origin: curl", "--data-binary", "plain text")
    assert text["ok"] and text["results"][0]["queue"] == "kafka:0"
    binary = curl("-X", "POST", f"{base}/produce?producer=http-writer", "-H",
                  "content-type: application/octet-stream", "--data-binary", "@-", data=b"\x80\x81")
    many = curl("-X", "POST", f"{base}/produce", "-H", "content-type: application/json", "--data", json.dumps(
        {"producer": "http-writer", "messages": [{"value": {"n": 1}, "tags": "t1"},
                                                 {"base64": base64.b64encode(b"\xff\x00").decode(), "key": "b"}]}))
    offsets = [r["offset"] for r in text["results"] + binary["results"] + many["results"]]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4
    got = {}
    for _ in range(20):
        answer = curl(f"{base}/message?consumer=http-reader&max=10&wait_ms=1000")
        got.update((m["offset"], m) for m in answer["messages"])
        if answer["token"]:
            assert curl("-X", "POST", f"{base}/ack", "-H", "content-type: application/json", "--data",
                        json.dumps({"consumer": "http-reader", "token": answer["token"]}))["ok"]
        if set(offsets) <= set(got):
            break
    first, second, third, fourth = (got[o] for o in offsets)
    assert (first["value"], first["key"], first["headers"]) == ("plain text", "k1", {"origin": "curl"})
    assert base64.b64decode(second["value"]) == b"\x80\x81" and second["binary"] == ["value"]
    assert third["value"] == '{"n":1}' and third["headers"] == {"tags": "t1"}
    assert base64.b64decode(fourth["value"]) == b"\xff\x00" and fourth["key"] == "b"


def test_node_fetch_produces_and_consumes(proxies):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: apt-get install -y nodejs (18 or later, for fetch)")
    values = ["from", "node", "fetch"]
    done = subprocess.run([node, str(Path(__file__).with_name("consume.mjs")), f"http://127.0.0.1:{proxies.ports[1]}",
                           "http-writer", "http-reader", *values], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    consumed = json.loads(done.stdout)
    assert [v for v in consumed if v in values] == values


def test_ack_token_piggy_back_and_a_late_ack(proxies):
    client = proxies.client(0)
    sent = client.produce("http-writer", [{"value": f"m{i}"} for i in range(3)]).json["results"]
    offsets = {r["offset"] for r in sent}
    got: dict[int, dict] = {}
    token = None
    for _ in range(20):
        query = {"max": 1, "wait_ms": 1000, **({"ack": token} if token else {})}
        answer = client.message("http-reader", **query).json
        if token:
            assert answer["ack"] == "ok"
        got.update((m["offset"], m) for m in answer["messages"])
        token = answer["token"]
        if offsets <= set(got):
            break
    assert offsets <= set(got)
    broker, queue, offset, next_offset, _ = token.split(":")
    assert (broker, queue, int(next_offset) - int(offset)) == ("kafka", "0", 1)
    # The other proxy acks it: the state is in Redis. A second ack of the same token is refused.
    assert proxies.client(1).ack("http-reader", token).status == 200
    late = proxies.client(1).ack("http-reader", token)
    assert late.status == 409 and late.json["error"] == "ack_expired"


def test_nack_redelivers_then_dead_letters_after_max_attempts(proxies):
    client = proxies.client(0)
    offset = client.produce("dl-writer", [{"value": "poison", "key": "p"}]).json["results"][0]["offset"]
    for attempt in (1, 2):
        answer = client.message("dl-reader", wait_ms=3000).json
        assert [m["offset"] for m in answer["messages"]] == [offset] and answer["attempt"] == attempt
        nacked = client.call("POST", "/nack", json_body={"consumer": "dl-reader", "token": answer["token"],
                                                         "delay_ms": 100 * attempt})
        assert nacked.status == 200
    # The third hand-out would exceed max_attempts = 2: the message goes to dl.dead and dl-reader moves on.
    assert client.message("dl-reader", wait_ms=500).json["messages"] == []
    moved = next(iter(consume_offsets(client, "dl-dead", {0}).values()))
    assert moved["value"] == "poison"
    assert moved["key"] == "p" and moved["headers"]["fastmq-origin"] == f"dl:kafka:0:{offset}"
    assert moved["headers"]["fastmq-attempts"] == "2"


def test_broadcast_gives_every_client_everything(proxies):
    client = proxies.client(0)
    sent = client.produce("bcast-writer", [{"value": f"b{i}", "key": f"k{i}"} for i in range(12)]).json["results"]
    wanted = {(r["queue"], r["offset"]) for r in sent}
    for n, client_id in enumerate(("alpha", "beta", "gamma")):
        reader = proxies.client(n % 2)
        seen: set[tuple[str, int]] = set()
        for _ in range(40):
            answer = reader.message("bcast", clientId=client_id, wait_ms=1000, max=50).json
            seen.update((answer["queue"], m["offset"]) for m in answer["messages"])
            if answer["token"]:
                assert reader.ack("bcast", answer["token"], clientId=client_id).status == 200
            if wanted <= seen:
                break
        assert wanted <= seen, client_id
    missing = client.message("bcast")
    assert missing.status == 400 and "clientId" in missing.json["message"]


def test_tokens_rate_limits_and_retry_after(proxies):
    anonymous = proxies.client(0)
    refused = anonymous.call("POST", "/produce", json_body={"producer": "guarded-writer", "value": "x"})
    assert refused.status == 401 and refused.json["error"] == "bad_token"
    wrong = ProxyClient(proxies.ports[0], "nope").message("guarded-reader")
    assert wrong.status == 401
    writer = proxies.client(0, "p-secret")
    statuses = [writer.call("POST", "/produce", json_body={"producer": "guarded-writer", "value": "x"}).status
                for _ in range(3)]
    assert statuses[0] == 200 and 429 in statuses
    limited = writer.call("POST", "/produce", json_body={"producer": "guarded-writer", "value": "x"})
    assert limited.status == 429 and int(limited.headers["retry-after"]) >= 1
    reader = proxies.client(1, "c-secret")
    answers = [reader.message("guarded-reader").status for _ in range(3)]
    assert answers[0] == 200 and 429 in answers


@pytest.mark.parametrize("method, path, kwargs, status, code", [
    ("POST", "/produce", {"body": b"{not json", "content_type": "application/json"}, 400, "bad_json"),
    ("POST", "/produce", {"body": b"[1]", "content_type": "application/json"}, 400, "bad_json"),
    ("POST", "/produce", {"body": b"x" * 70000, "content_type": "text/plain"}, 413, "too_large"),
    ("POST", "/produce", {"body": b"x", "content_type": "image/png"}, 415, "unsupported_media_type"),
    ("POST", "/produce", {"json_body": {"producer": "nobody", "value": "x"}}, 404, "unknown_producer"),
    ("POST", "/produce", {"json_body": {"producer": "http-writer", "topic": "many", "value": "x"}}, 403,
     "wrong_topic"),
    ("POST", "/produce", {"json_body": {"producer": "http-writer", "messages": []}}, 400, "bad_message"),
    ("POST", "/produce", {"json_body": {"producer": "http-writer", "value": "x", "base64": "eA=="}}, 400,
     "bad_message"),
    ("POST", "/produce", {"json_body": {"producer": "http-writer", "base64": "***"}}, 400, "bad_message"),
    ("POST", "/produce", {"body": b'{"producer": "http-writer", "value": "\\ud800"}', "content_type": "application/json"},
     400, "bad_message"),
    ("POST", "/produce", {"json_body": {"producer": "http-writer", "messages": [{"value": "x"}] * 501}}, 413,
     "too_many_messages"),
    ("GET", "/message", {"query": {"consumer": "http-reader", "max": "0"}}, 400, "bad_parameter"),
    ("GET", "/message", {"query": {"consumer": "no body"}}, 400, "bad_parameter"),
    ("GET", "/message", {"query": {"consumer": "nobody"}}, 404, "unknown_consumer"),
    ("GET", "/message", {"query": {"consumer": "http-reader", "ack": "garbage"}}, 400, "bad_token"),
    ("GET", "/message", {}, 400, "missing_parameter"),
    ("POST", "/ack", {"json_body": {"consumer": "http-reader", "token": "kafka:0:5:3:1"}}, 400, "bad_token"),
    ("POST", "/ack", {"json_body": {"consumer": "http-reader", "token": "kafka:0:1:2:3"}}, 409, "ack_expired"),
    ("GET", "/produce", {}, 405, "method_not_allowed"),
    ("GET", "/nothing", {}, 404, "not_found"),
    ("GET", "/admin/consumers", {}, 401, "bad_token"),
])
def test_bad_input_gets_a_clear_4xx(proxies, method, path, kwargs, status, code):
    answer = proxies.client(0).call(method, path, **kwargs)
    assert answer.status == status, answer.body
    assert answer.json["ok"] is False and answer.json["error"] == code and answer.json["message"]


def test_openapi_metrics_and_health(proxies):
    client = proxies.client(1)
    spec = client.call("GET", "/openapi.json").json
    assert spec["openapi"].startswith("3.") and {"/produce", "/message", "/ack", "/nack"} <= set(spec["paths"])
    assert client.call("GET", "/healthz").json == {"ok": True}
    metrics = client.call("GET", "/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE fastmq_proxy_requests_total counter" in metrics.body.decode()
    assert "fastmq_proxy_redis_round_trips_total" in metrics.body.decode()


def test_admin_registers_pauses_resets_and_limits_a_consumer(proxies):
    admin = proxies.admin(0)
    for kind, entry in (("producers", {"name": "admin-writer", "topic": "admin"}),
                        ("consumers", {"name": "admin-reader", "topic": "admin", "lease_ms": 10000,
                                       "backlog_alert": 2})):
        created = admin.call("POST", f"/admin/{kind}", json_body=entry)
        assert created.status == 201, created.body
    bad = admin.call("POST", "/admin/consumers", json_body={"name": "x", "topic": "admin", "mode": "odd"})
    assert bad.status == 400 and "mode" in bad.json["message"]
    other = proxies.client(1)               # the other process finds the registration in Redis
    sent = other.produce("admin-writer", [{"value": f"a{i}", "key": f"k{i}"} for i in range(6)]).json["results"]
    everything = {(r["queue"], r["offset"]) for r in sent}
    assert admin.call("POST", "/admin/consumers/admin-reader/pause").json["paused"] is True
    assert other.message("admin-reader", wait_ms=2000).json["status"] == "paused"
    admin.call("POST", "/admin/consumers/admin-reader/resume")
    seen = set()
    for _ in range(30):
        answer = other.message("admin-reader", wait_ms=1000, max=50).json
        seen.update((answer["queue"], m["offset"]) for m in answer["messages"])
        if answer["token"]:
            other.ack("admin-reader", answer["token"])
        if everything <= seen:
            break
    described = admin.call("GET", "/admin/consumers/admin-reader").json
    assert described["backlog"] == 0 and {q["queue"] for q in described["queues"]} == {"kafka:0", "kafka:1"}
    assert not any(q["alert"] for q in described["queues"])
    reset = admin.call("POST", "/admin/consumers/admin-reader/reset", json_body={"to": "earliest"})
    assert reset.status == 200 and set(reset.json["offsets"].values()) == {0}
    described = admin.call("GET", "/admin/consumers/admin-reader").json
    assert described["backlog"] == len(sent)
    # A queue with at least backlog_alert messages waiting is flagged (6 over 2 queues: one has 3 or more).
    assert all(q["alert"] == (q["backlog"] >= 2) for q in described["queues"]), described
    assert any(q["alert"] for q in described["queues"])
    assert admin.call("POST", "/admin/consumers/admin-reader/reset", json_body={"to": "later"}).status == 400
    admin.call("POST", "/admin/consumers/admin-reader/rate", json_body={"rate": 1, "burst": 1})
    assert 429 in [other.message("admin-reader").status for _ in range(3)]
    admin.call("POST", "/admin/consumers/admin-reader/rate", json_body={"rate": 0})
    assert {c["name"] for c in admin.call("GET", "/admin/consumers").json["consumers"]} >= {"admin-reader",
                                                                                            "http-reader"}
    page = admin.call("GET", "/")
    assert page.status == 200 and b"/admin/consumers" in page.body
    assert admin.call("DELETE", "/admin/consumers/admin-reader").status == 200
    assert admin.call("DELETE", "/admin/consumers/admin-reader").status == 404
