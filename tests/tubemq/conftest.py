from __future__ import annotations

import pytest

from tests.support.tubemq import RealTubeMQ, TubeMQCluster, start_tubemq


@pytest.fixture(scope="session")
def tubemq() -> TubeMQCluster:
    """One embedded TubeMQ master + broker for the session (4 partitions per topic); tests use their own topics."""
    cluster = start_tubemq()
    yield cluster
    cluster.embedded.close()


@pytest.fixture(scope="session")
def real_tubemq() -> RealTubeMQ:
    """One Apache InLong TubeMQ 2.4.0 master + broker for the session (started in about 10 s); TubeMQ creates no
    topics on use, so every topic a test uses is declared here."""
    real = RealTubeMQ(("real_topic", "real_shared", "real_bound")).start()
    yield real
    real.stop()
