"""`fastmq broker` as a server process and `fastmq broker-stats` reading what it counts."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from fastmq.broker import BrokerProcess
from fastmq.kafka import Producer
from tests.support.cli import run_fastmq
from tests.support.waiting import wait_for


def test_broker_serves_and_reports_statistics(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, args=["--partitions", "2"]) as broker:
        with Producer(broker.bootstrap_servers, linger_ms=1) as producer:
            for i in range(30):
                producer.send("cli-topic", b"value-%d" % i, partition=i % 2)
            producer.flush(30)
        broker.stop()                       # SIGTERM: a clean shutdown writes the final statistics
        assert broker.process.returncode == 0
    result = run_fastmq("broker-stats", "--data-dir", str(data), text=True)
    assert result.returncode == 0, result.stderr
    assert "cli-topic" in result.stdout and "put" in result.stdout
    stats = json.loads(run_fastmq("broker-stats", "--data-dir", str(data), "--json", text=True).stdout)
    assert stats["topics"]["cli-topic"]["put"]["messages"] == 30
    assert [p["high_watermark"] for p in stats["partitions"]["cli-topic"]] == [15, 15]


def test_broker_stats_without_a_broker(tmp_path):
    result = run_fastmq("broker-stats", "--data-dir", str(tmp_path), text=True)
    assert result.returncode == 1 and "is a broker running there" in result.stderr


def test_broker_refuses_bad_options(tmp_path):
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--listen", "SASL_PLAINTEXT://127.0.0.1:0", text=True)
    assert result.returncode != 0 and "needs users" in result.stderr
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--user", "no-password-separator", text=True)
    assert result.returncode != 0 and "name=password" in result.stderr
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--listen", "carrier-pigeon://127.0.0.1:0", text=True)
    # (the protocols listed grow with the front ends: kafka first, whatever else is there)
    assert result.returncode != 0 and "a listener's scheme is a protocol (kafka" in result.stderr
    assert "'carrier-pigeon'" in result.stderr


def test_broker_holds_its_data_directory(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data):
        started = time.monotonic()
        result = run_fastmq("broker", "--data-dir", str(data), "--listen", "127.0.0.1:0", text=True)
        assert result.returncode != 0 and "in use by another process" in result.stderr
        assert time.monotonic() - started < 60


OWNER = """
import sys, time
from fastmq.broker import BrokerProcess
broker = BrokerProcess(sys.argv[1]).start()
print(broker.process.pid, flush=True)
time.sleep(120)
"""


def test_broker_process_does_not_outlive_a_killed_owner(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "data")], stdout=subprocess.PIPE, text=True)
    try:
        broker_pid = int(owner.stdout.readline())
        owner.kill()                        # SIGKILL: the owner cleans nothing up
        owner.wait(30)
        wait_for(lambda: not _alive(broker_pid), 30, message=f"the broker (pid {broker_pid}) exiting")
    finally:
        owner.kill()
        owner.stdout.close()


def _alive(pid: int) -> bool:
    # The broker is not our child: once it exits, init reaps it and the pid is gone (or a zombie until then).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_broker_max_connections_beyond_the_open_file_limit_is_refused(tmp_path):
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0",
                        "--max-connections", str(1 << 40), text=True)
    assert result.returncode != 0 and "RLIMIT_NOFILE" in result.stderr and "--max-connections" in result.stderr


def test_broker_max_connections_reaches_the_config(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--max-connections", "12345"])
    assert broker_config(args).max_connections == 12345


def test_broker_max_open_mapped_files_reaches_the_store(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    parse = build_parser().parse_args
    assert broker_config(parse(["broker", "--data-dir", str(tmp_path), "--max-open-mapped-files", "32"])
                         ).store_config().max_open_mapped_files == 32
    default = broker_config(parse(["broker", "--data-dir", str(tmp_path)])).store_config().max_open_mapped_files
    assert default >= 16


def test_broker_disk_ratios_reach_the_store_and_bad_ones_are_refused(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    parse = build_parser().parse_args
    store = broker_config(parse(["broker", "--data-dir", str(tmp_path), "--disk-ratios", "90,95,98"])).store_config()
    assert (store.disk_max_used_space_ratio, store.disk_space_clean_forcibly_ratio,
            store.disk_space_warning_level_ratio) == (90, 95, 98)
    default = broker_config(parse(["broker", "--data-dir", str(tmp_path)])).store_config()
    assert (default.disk_max_used_space_ratio, default.disk_space_clean_forcibly_ratio) == (75, 85)
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--disk-ratios", "90,80,95", text=True)
    assert result.returncode != 0 and "disk_ratios 90,80,95" in result.stderr
    result = run_fastmq("broker", "--data-dir", str(tmp_path), "--disk-ratios", "90,95", text=True)
    assert result.returncode != 0 and "USED,FORCED,FULL" in result.stderr
