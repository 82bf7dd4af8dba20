"""Fixtures of the proxy tests: one real Redis for the session, a fresh namespace per test."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from tests.proxy.client import ProxyClient
from tests.proxy.processes import proxy_process
from tests.support.redis import start_redis
from tests.support.servers import SERVER_LOGS, ServerProcess, free_port


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """redis://127.0.0.1:PORT/0 of a redis-server started for the session."""
    process, url = start_redis(tmp_path_factory.mktemp("redis"))
    SERVER_LOGS["redis_url"] = lambda: [("redis-server", process.log_tail())]
    try:
        yield url
    finally:
        del SERVER_LOGS["redis_url"]
        process.stop()


@pytest.fixture
def namespace() -> str:
    """A key prefix of this test alone, so that tests sharing the session's Redis never see each other."""
    return f"test-{uuid.uuid4().hex[:12]}"


# ---- proxies -----------------------------------------------------------------------------------------------

ADMIN_TOKEN = "admin-secret"
TOPICS = {"http": 1, "many": 4, "crash": 4, "bcast": 2, "dl": 1, "dl.dead": 1, "admin": 2, "page": 1}
CONFIG = """
admin_token = "admin-secret"
max_body_bytes = 65536
max_messages_per_produce = 500
[producers.http-writer]
topic = "http"
[producers.guarded-writer]
topic = "http"
token = "p-secret"
rate = 1
[producers.many-writer]
topic = "many"
[producers.crash-writer]
topic = "crash"
[producers.bcast-writer]
topic = "bcast"
[producers.dl-writer]
topic = "dl"
[producers.page-writer]
topic = "page"
[consumers.page-reader]
topic = "page"
[consumers.http-reader]
topic = "http"
lease_ms = 10000
[consumers.guarded-reader]
topic = "http"
token = "c-secret"
rate = 1
burst = 1
[consumers.many-group]
topic = "many"
lease_ms = 20000
[consumers.crash-group]
topic = "crash"
lease_ms = 3000
max_attempts = 1000
[consumers.bcast]
topic = "bcast"
mode = "broadcast"
[consumers.dl-reader]
topic = "dl"
lease_ms = 10000
max_attempts = 2
dead_letter_topic = "dl.dead"
[consumers.dl-dead]
topic = "dl.dead"
"""


@dataclass
class Proxies:
    """Two `fastmq proxy` processes sharing the session's Redis and embedded broker."""

    processes: list[ServerProcess]
    ports: list[int]
    bootstrap_servers: str

    def client(self, index: int = 0, token: str | None = None) -> ProxyClient:
        return ProxyClient(self.ports[index], token)

    def admin(self, index: int = 0) -> ProxyClient:
        return ProxyClient(self.ports[index], ADMIN_TOKEN)

    def ensure_running(self) -> None:
        for process in self.processes:
            if not process.running:
                process.start()


@pytest.fixture(scope="session")
def proxies(redis_url, embedded_broker, tmp_path_factory) -> Proxies:
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    directory = tmp_path_factory.mktemp("proxy")
    config = directory / "proxy.toml"
    config.write_text(f'redis_url = "{redis_url}"\nnamespace = "session-{uuid.uuid4().hex[:8]}"\n' + CONFIG)
    with Admin(embedded_broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in TOPICS.items()])
        admin.wait_for_topics(list(TOPICS), timeout=30)
    ports = [free_port(), free_port()]
    processes = [proxy_process(f"fastmq-proxy-{n}", config, embedded_broker.bootstrap_servers, port,
                               directory / f"proxy-{n}.log") for n, port in enumerate(ports)]
    for process in processes:
        process.launch()
    try:
        for process in processes:
            process.await_ready()
        SERVER_LOGS["proxies"] = lambda: [(p.name, p.log_tail()) for p in processes]
        yield Proxies(processes, ports, embedded_broker.bootstrap_servers)
    finally:
        SERVER_LOGS.pop("proxies", None)
        for process in processes:
            process.stop()
