"""fastmq: high-throughput message-queue clients with a compiled core."""
from __future__ import annotations

__version__ = "0.1.0"

try:
    from fastmq._native import buffer as _buffer  # noqa: F401  (the compiled layer must be present)
except ImportError as exc:  # pragma: no cover - exercised by tests/test_import.py in a subprocess
    raise ImportError(
        "fastmq's compiled modules are missing or were built for another Python. Build them with "
        "`pip install .` (or `python setup.py build_ext --inplace` in a source checkout); a C compiler "
        "and the Python headers are needed. fastmq has no pure-Python fallback."
    ) from exc
