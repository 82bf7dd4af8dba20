"""fastmq: high-throughput message-queue clients with a compiled core."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

__version__ = "0.1.0"

# Every logger is named under "fastmq."; without this handler Python's last-resort handler would print the
# library's warnings on stderr of an application that configured no logging.
logging.getLogger("fastmq").addHandler(logging.NullHandler())


def _build_instructions() -> str:
    checkout = Path(__file__).resolve().parent.parent
    python = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    if (checkout / "setup.py").is_file():
        return (f"this is a source checkout ({checkout}) whose extensions are not built for {python}: run "
                f"`pip install .` (or `pip install -e .`, or `python setup.py build_ext --inplace`) there")
    return f"reinstall it for {python}: `pip install --force-reinstall fastmq`, or `pip install .` from a checkout"


try:
    from fastmq._native import buffer as _buffer  # noqa: F401  (the compiled layer must be present)
except ImportError as exc:  # pragma: no cover - exercised by tests/test_import.py in a subprocess
    raise ImportError(
        f"fastmq's compiled modules are missing or were built for another Python; {_build_instructions()}. "
        "Building needs a C compiler and the Python headers; fastmq has no pure-Python fallback."
    ) from exc
