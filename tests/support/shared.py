"""../shared beside the checkout: test vectors read in place, never copied in. Tests that need it are skipped,
each with one line saying so, when it is missing; the rest of the suite runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden"
MISSING = f"needs the test vectors in {GOLDEN} (clone the repository beside ../shared)"


def golden_path(*parts: str) -> Path:
    """A path under ../shared/golden; skips the calling test when ../shared/golden is missing."""
    if not GOLDEN.is_dir():
        pytest.skip(MISSING)
    return GOLDEN.joinpath(*parts)


def golden_params(relative: str, key: str) -> list:
    """The list `key` of a JSON file under ../shared/golden, for parametrize (one skipped case when missing)."""
    path = GOLDEN / relative
    if not path.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=MISSING))]
    return json.loads(path.read_text())[key]
