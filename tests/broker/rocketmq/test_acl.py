"""ACL 1.0 on the embedded broker (fastmq/broker/rocketmq/acl.py): the client tests written against Apache
RocketMQ with authentication on (tests/rocketmq/test_acl.py) run unchanged against a broker whose rocketmq
option acl_enable is set, the Java client signs with rocketmq-acl's AclClientRPCHook, and a bad request is
refused without closing the connection. `fastmq broker --rocketmq-acl` reaches the option."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from fastmq.rocketmq import Credentials
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from tests import rocketmq_java
from tests.rocketmq import test_acl as apache_acl_tests

from .conftest import FAST_DELAY_LEVELS, Remoting, broker_address, rocketmq_broker

USER, PASSWORD = apache_acl_tests.USER, apache_acl_tests.PASSWORD


@dataclasses.dataclass(frozen=True)
class AclBroker:
    namesrv_addr: str
    broker: object


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    options = {"rocketmq": {"message_delay_level": FAST_DELAY_LEVELS, "acl_enable": True}}
    with rocketmq_broker(tmp_path_factory.mktemp("acl") / "data", users={USER: PASSWORD},
                         front_end_options=options) as embedded:
        yield AclBroker(embedded.address("namesrv"), embedded)


test_signed_requests_send_and_pull = apache_acl_tests.test_signed_requests_send_and_pull
test_bad_or_missing_signature_is_refused = apache_acl_tests.test_bad_or_missing_signature_is_refused
test_compat_session_credentials = apache_acl_tests.test_compat_session_credentials


def test_the_java_client_signs_and_is_refused_unsigned(acl_server, tmp_path):
    results, output = rocketmq_java.run(acl_server.namesrv_addr, tmp_path / f"acl{uuid.uuid4().hex[:8]}",
                                        scenario="acl", credentials=(USER, PASSWORD))
    assert "acl" in results, f"the Java client's acl scenario failed:\n{output[-8000:]}"
    result = {key: value for key, value in results["acl"].items() if key != "ms"}
    assert result == {"sent": "5", "pulled": "5", "wrong_secret": str(ResponseCode.NO_PERMISSION),
                      "unsigned": str(ResponseCode.NO_PERMISSION)}


@pytest.mark.parametrize("change", ["unknown-key", "tampered-field", "tampered-body", "no-signature"])
def test_refused_requests_leave_the_connection_serving(acl_server, change):
    fields = {"consumerGroup": "acl-raw", "topic": "acl-raw", "queueId": "0"}
    signed = Credentials(USER, PASSWORD).sign(fields, b"body")
    body = b"body"
    if change == "unknown-key":
        signed = Credentials("nobody", PASSWORD).sign(fields, body)
    elif change == "tampered-field":
        signed["queueId"] = "1"
    elif change == "tampered-body":
        body = b"other"
    else:
        del signed["Signature"]
    connection = Remoting(broker_address(acl_server.broker))
    try:
        refused = connection.call(RequestCode.GET_MAX_OFFSET, signed, body)
        assert refused.code == ResponseCode.NO_PERMISSION and refused.remark
        answered = connection.call(RequestCode.GET_MAX_OFFSET, Credentials(USER, PASSWORD).sign(fields, body), body)
        assert answered.code != ResponseCode.NO_PERMISSION
    finally:
        connection.close()


def test_acl_needs_users(tmp_path):
    from fastmq.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="acl_enable"):
        with rocketmq_broker(tmp_path / "data", front_end_options={"rocketmq": {"acl_enable": True}}):
            pass


def test_the_command_line_turns_acl_on(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--rocketmq", "127.0.0.1:0",
                                      "--user", f"{USER}={PASSWORD}", "--rocketmq-acl"])
    config = broker_config(args)
    assert config.front_end_options == {"rocketmq": {"acl_enable": True}} and config.users == {USER: PASSWORD}
