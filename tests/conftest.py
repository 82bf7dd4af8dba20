"""Fixtures and settings shared by the whole suite. Fixtures for one package live in its conftest.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests run without per-example deadlines (the machine is shared with brokers started by other
# tests); FASTMQ_HYPOTHESIS_PROFILE=thorough multiplies the examples for a longer local run.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("FASTMQ_HYPOTHESIS_PROFILE", "default"))

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden"


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """../shared/golden beside the repository (test vectors are read there, never copied in)."""
    if not GOLDEN.is_dir():
        pytest.fail(f"golden test data not found at {GOLDEN}: clone the repository beside ../shared")
    return GOLDEN
