"""The layers of the compiled code point down only (docs/ARCHITECTURE.md): fastmq/_native knows no protocol and
none of the packages above it, and a protocol's _native part (fastmq/<protocol>/_native, or a broker front end's
fastmq/broker/<protocol>/_native) knows no other protocol. Read from the import and cimport lines of every .pyx and
.pxd, since import-linter sees only Python files."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "fastmq"
PROTOCOLS = {"kafka", "rocketmq", "tubemq", "nsq"}
ABOVE_NATIVE = PROTOCOLS | {"io", "client", "broker", "store", "cli", "proxy", "spark"}

# `import a.b`, `import a.b as c`, `cimport a.b`, `from a.b import x`, `from a.b cimport (x, ...)`, at any indent.
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.MULTILINE)


def imported_modules(text: str) -> list[str]:
    return [match.group(1) or match.group(2) for match in IMPORT.finditer(text)]


def protocol_of(parts: tuple[str, ...]) -> str | None:
    """The protocol a module path (fastmq, kafka, _native, records) belongs to, or None."""
    if len(parts) > 1 and parts[1] in PROTOCOLS:
        return parts[1]
    if len(parts) > 2 and parts[1] == "broker" and parts[2] in PROTOCOLS:
        return parts[2]
    return None


def violations(module: tuple[str, ...], text: str) -> list[str]:
    """What the file at `module` (its dotted path as a tuple) must not import."""
    found = []
    own_protocol = protocol_of(module)
    for name in imported_modules(text):
        target = tuple(name.split("."))
        if target[0] != "fastmq":
            continue
        if module[1] == "_native" and len(target) > 1 and target[1] in ABOVE_NATIVE:
            found.append(f"{'.'.join(module)} (the protocol-free compiled layer) imports {name}")
        target_protocol = protocol_of(target)
        if own_protocol and "_native" in module and target_protocol not in (None, own_protocol):
            found.append(f"{'.'.join(module)} ({own_protocol}) imports another protocol: {name}")
    return found


def compiled_sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*") if p.suffix in (".pyx", ".pxd"))


def test_the_checker_sees_imports_and_cimports():
    text = "from fastmq.kafka.errors import (\n    A,\n)\n    cimport fastmq.io.loop\nimport fastmq.errors as e\n"
    assert imported_modules(text) == ["fastmq.kafka.errors", "fastmq.io.loop", "fastmq.errors"]
    assert len(violations(("fastmq", "_native", "x"), text)) == 2
    assert violations(("fastmq", "tubemq", "_native", "x"), "from fastmq.broker.kafka._native cimport y")
    assert not violations(("fastmq", "broker", "kafka", "_native", "x"), "from fastmq.kafka._native cimport y")


@pytest.mark.parametrize("path", compiled_sources(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_compiled_modules_import_downward_only(path: Path):
    module = path.relative_to(ROOT.parent).with_suffix("").parts
    assert violations(module, path.read_text()) == []


def test_every_native_directory_is_checked():
    # A renamed tree must not leave the test checking nothing.
    checked = {path.parent.relative_to(ROOT.parent).as_posix() for path in compiled_sources()}
    assert {"fastmq/_native", "fastmq/kafka/_native", "fastmq/broker/kafka/_native"} <= checked
