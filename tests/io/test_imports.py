"""fastmq.io's modules import each other in one direction only (type-checking imports included), and nothing
above the engine: no protocol package, no client, broker or store."""
from __future__ import annotations

import ast
from pathlib import Path

IO_DIR = Path(__file__).resolve().parents[2] / "fastmq" / "io"
ALLOWED_OUTSIDE = ("fastmq.errors", "fastmq._native")


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name == "fastmq" or name.startswith("fastmq.")}


def io_graph() -> dict[str, set[str]]:
    return {f"fastmq.io.{path.stem}": imported_modules(path) for path in IO_DIR.glob("*.py")
            if path.stem != "__init__"}


def test_io_imports_nothing_above_it():
    for module, imports in io_graph().items():
        outside = {name for name in imports if not name.startswith("fastmq.io") and not name.startswith(ALLOWED_OUTSIDE)}
        assert not outside, f"{module} imports {sorted(outside)}"


def test_io_modules_import_each_other_in_one_direction_only():
    full = io_graph()
    graph = {module: {name for name in imports if name in full} for module, imports in full.items()}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(module):] + [module]))
        if module in done:
            return
        for name in graph[module]:
            visit(name, path + [module])
        done.add(module)

    for module in graph:
        visit(module, [])
    assert len(done) == len(graph) >= 10
