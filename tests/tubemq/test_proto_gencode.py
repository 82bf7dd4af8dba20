"""fastmq/tubemq/_proto holds what protoc makes of proto/tubemq today (regenerate after editing a .proto)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_classes_match_the_protos(tmp_path):
    protos = sorted((ROOT / "proto" / "tubemq").glob("*.proto"))
    done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto' / 'tubemq'}",
                           f"--python_out={tmp_path}", *map(str, protos)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for proto in protos:
        generated = f"{proto.stem}_pb2.py"
        assert (tmp_path / generated).read_text() == (ROOT / "fastmq" / "tubemq" / "_proto" / generated).read_text(), \
            f"fastmq/tubemq/_proto/{generated} is stale: see fastmq/tubemq/_proto/__init__.py"
