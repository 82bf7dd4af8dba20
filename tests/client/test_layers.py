"""fastmq.client sits under every protocol: it imports fastmq.io, fastmq._native and fastmq.errors only."""
from __future__ import annotations

import ast
from pathlib import Path

import fastmq.client

ALLOWED = ("fastmq.client", "fastmq.io", "fastmq._native", "fastmq.errors")


def test_fastmq_client_imports_no_protocol():
    for path in Path(fastmq.client.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "fastmq" or name.startswith("fastmq."):
                    assert name.startswith(ALLOWED), f"{path.name} imports {name}"
