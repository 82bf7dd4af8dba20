"""Importing fastmq.spark without pyspark names the extra to install."""
from __future__ import annotations

import subprocess
import sys


def test_import_without_pyspark_names_the_extra():
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "try:\n    import fastmq.spark\nexcept ImportError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "pip install 'fastmq[spark]'" in result.stdout

