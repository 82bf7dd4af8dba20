"""The topic creator that test_config_journal.py kills with SIGKILL: it creates topics r{round}-{i} one after
another, deleting every third one's predecessor, and prints "put NAME" or "del NAME" once each change returned.
Not a test module; run as a script."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastmq.store import TopicConfig, TopicConfigManager  # noqa: E402


def main() -> None:
    config_dir, round_number = Path(sys.argv[1]), int(sys.argv[2])
    manager = TopicConfigManager(config_dir)
    manager.load()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for i in range(1_000_000):      # killed long before
        name = f"r{round_number}-{i}"
        manager.update_topic_config(TopicConfig(name, 4, 4))
        sys.stdout.write(f"put {name}\n")
        if i % 3 == 2:
            manager.delete_topic_config(f"r{round_number}-{i - 1}")
            sys.stdout.write(f"del r{round_number}-{i - 1}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
