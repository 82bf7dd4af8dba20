from __future__ import annotations

import pytest

from tests.support.tubemq import TubeMQCluster, start_tubemq


@pytest.fixture(scope="session")
def tubemq() -> TubeMQCluster:
    """One embedded TubeMQ master + broker for the session (4 partitions per topic); tests use their own topics."""
    cluster = start_tubemq()
    yield cluster
    cluster.embedded.close()
