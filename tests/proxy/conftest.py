"""Fixtures of the proxy tests: one real Redis for the session, a fresh namespace per test."""
from __future__ import annotations

import uuid

import pytest

from tests.support.redis import start_redis
from tests.support.servers import SERVER_LOGS


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
