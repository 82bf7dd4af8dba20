"""Importing fastmq without its compiled modules is an error that says how to build them."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_missing_compiled_modules_raise_with_build_instructions():
    # A meta-path finder hides every compiled module, as an unbuilt source checkout would.
    script = textwrap.dedent("""
        import importlib.abc, sys

        class HideCompiled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.startswith("fastmq._native."):
                    raise ImportError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, HideCompiled())
        try:
            import fastmq
        except ImportError as exc:
            print("ERROR:", exc)
        else:
            print("IMPORTED")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "ERROR:" in result.stdout, result.stdout + result.stderr
    assert "pip install ." in result.stdout and "no pure-Python fallback" in result.stdout


def test_compiled_modules_are_present():
    import fastmq._native.buffer as buffer

    assert buffer.__file__.endswith(".so")
