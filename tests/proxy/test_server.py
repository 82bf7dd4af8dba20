"""Serving (fastmq/proxy/server.py): SIGTERM answers the long polls in flight, then `fastmq proxy` ends with code 0
(one process, and --processes 2); every log line is a JSON object."""
from __future__ import annotations

import json
import signal
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import pytest
import redis

from fastmq.cli.proxy import READY_PREFIX
from tests.proxy.client import ProxyClient
from tests.proxy.processes import proxy_process
from tests.support.servers import free_port
from tests.support.waiting import wait_for

@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_answers_long_polls_and_exits_with_json_logs(redis_url, embedded_broker, tmp_path, processes):
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    topic = f"shutdown-{uuid.uuid4().hex[:8]}"
    with Admin(embedded_broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.wait_for_topics([topic], timeout=30)
    config = tmp_path / "proxy.toml"
    config.write_text(f'redis_url = "{redis_url}"\nnamespace = "{topic}"\n'
                      f'[consumers.shutdown-reader]\ntopic = "{topic}"\n')
    port = free_port()
    process = proxy_process("fastmq-proxy-shutdown", config, embedded_broker.bootstrap_servers, port,
                            tmp_path / "proxy.log", processes=processes, log_level="info")
    process.start()
    try:
        client = ProxyClient(port, timeout=30)
        with ThreadPoolExecutor(1) as pool, closing(redis.Redis.from_url(redis_url)) as state:
            poll = pool.submit(client.message, "shutdown-reader", wait_ms=25000)
            # The long poll is in flight once a proxy ran its first choose, which made the consumer's hash.
            wait_for(lambda: state.exists(f"{topic}:{{shutdown-reader}}:{topic}"), 15, interval=0.02,
                     message="the long poll's first choose")
            process.process.send_signal(signal.SIGTERM)
            answer = poll.result(timeout=20)             # well before its 25 s wait
        assert answer.status == 200, answer.body
        assert (answer.json["status"], answer.json["messages"], answer.json["token"]) == ("empty", [], None)
        assert process.process.wait(20) == 0
    finally:
        process.stop()
    # Beside the log: the line ServerProcess writes before the command, and the command's own ready line.
    lines = [line for line in (tmp_path / "proxy.log").read_text().splitlines()
             if line.strip() and not line.startswith("==== ") and not line.startswith(READY_PREFIX)]
    entries = [json.loads(line) for line in lines]
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in entries), lines
    # Every process that started stopped gracefully (with 2, the second may still be starting at the SIGTERM).
    started = sum(entry["message"].startswith("proxy started") for entry in entries)
    assert 1 <= started <= processes, lines
    assert sum(entry["message"] == "proxy stopped" for entry in entries) == started, lines
