"""The real NSQ of the session: one nsqlookupd and one nsqd (v1.3.0, tests/support/nsq.py), shared by all NSQ tests;
each test uses topics of its own."""
from __future__ import annotations

import itertools

import pytest

from tests.support.nsq import NSQCluster, tls_args
from tests.support.servers import SERVER_LOGS

_names = itertools.count()
SCANNED_TOPIC, SCANNED_CHANNEL = "scanned", "ch"


@pytest.fixture(scope="session")
def nsq(tmp_path_factory, pki):
    """.lookupd (.http_address) and .nsqd (.tcp_address, .http_address, create_topic, stop/kill/start); nsqd
    offers TLS with the test PKI's server certificate."""
    cluster = NSQCluster(tmp_path_factory.mktemp("nsq"), tls_args(pki.server_cert, pki.server_key)).start()
    # nsqd's scans for deferred and timed-out messages learn of new channels only every 5 s: a channel made now
    # is known to them by the time the tests that need it run.
    cluster.nsqd.create_topic(SCANNED_TOPIC, SCANNED_CHANNEL)
    SERVER_LOGS["nsq"] = cluster.logs
    try:
        yield cluster
    finally:
        del SERVER_LOGS["nsq"]
        cluster.stop()


@pytest.fixture
def topic(request) -> str:
    """A topic name of this test's own."""
    return f"t{next(_names)}_{request.node.name[:40]}".replace("[", "_").replace("]", "_").replace("-", "_")
