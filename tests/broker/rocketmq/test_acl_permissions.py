"""ACL 1.0 permissions on the embedded broker (fastmq/broker/rocketmq/acl.py) from an account file in
plain_acl.yml's shape (the rocketmq option acl_file, `fastmq broker --rocketmq-acl-file`): per-topic and per-group
permissions and their defaults, admin requests, white remote addresses, session accounts with a SecurityToken.
Raw signed requests and the Java client 4.9.8 signing with AclClientRPCHook and SessionCredentials; every refusal
is NO_PERMISSION (16), the connection kept. Apache RocketMQ 5.5's broker has no plain ACL 1.0 any more (only its
migration to ACL 2.0), so Apache's rules were read from rocketmq-acl 4.9.8 (PlainPermissionManager,
PlainAccessValidator, Permission) rather than compared with a running broker."""
from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from fastmq.broker.rocketmq.acl import DENY, PUB, SUB, AclConfig, AddressPattern, permitted
from fastmq.errors import ConfigurationError
from fastmq.rocketmq import Credentials
from tests import rocketmq_java
from tests.support.waiting import wait_for

from .conftest import FAST_DELAY_LEVELS, Remoting, broker_address, rocketmq_broker

SEND_V2, PULL, CREATE_TOPIC, QUERY_OFFSET, HEART_BEAT = 310, 11, 17, 14, 34
NO_PERMISSION, SUCCESS = 16, 0
SECRET = "secret-key-1"
ACL_FILE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: reader1
    secretKey: secret-key-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - t-pub=PUB
      - t-sub=SUB
      - t-both=PUB|SUB
      - t-deny=DENY
    groupPerms:
      - g-deny=DENY
  - accessKey: admin01
    secretKey: secret-key-1
    admin: true
  - accessKey: stsuser
    secretKey: secret-key-1
    securityToken: token-of-the-session
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - t-sub=SUB
      - t-deny=DENY
  - accessKey: trusted
    secretKey: secret-key-1
    whiteRemoteAddress: 127.0.0.{1,2}
"""


@pytest.fixture(scope="module")
def rmq(tmp_path_factory):
    """This module's broker (conftest's `client` connects to it)."""
    directory = tmp_path_factory.mktemp("acl-perms")
    (directory / "plain_acl.yml").write_text(ACL_FILE)
    options = {"rocketmq": {"message_delay_level": FAST_DELAY_LEVELS, "acl_file": str(directory / "plain_acl.yml")}}
    with rocketmq_broker(directory / "data", front_end_options=options) as embedded:
        connection = Remoting(broker_address(embedded))
        try:
            for topic in ("t-pub", "t-sub", "t-both", "t-deny", "t-other"):
                made = connection.call(CREATE_TOPIC, Credentials("admin01", SECRET).sign(
                    {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}))
                assert made.code == SUCCESS, made.remark
        finally:
            connection.close()
        yield embedded


def send_fields(topic: str, group: str = "acl-pg") -> dict:
    return {"a": group, "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "", "j": 0,
            "k": "false"}


def pull_fields(topic: str, group: str) -> dict:
    return {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0,
            "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}


def code_of(connection: Remoting, code: int, fields: dict, credentials: Credentials | None,
            body: bytes | None = None) -> int:
    signed = credentials.sign(fields, body) if credentials else fields
    answer = connection.call(code, signed, body)
    assert answer.code != NO_PERMISSION or answer.remark, "a refusal says why"
    return answer.code


READER = Credentials("reader1", SECRET)


@pytest.mark.parametrize("topic, allowed", [("t-pub", True), ("t-both", True), ("t-sub", False), ("t-deny", False),
                                            ("t-other", False)])
def test_sends_need_pub_on_the_topic(client, topic, allowed):
    code = code_of(client, SEND_V2, send_fields(topic), READER, b"hello")
    assert (code == SUCCESS) if allowed else (code == NO_PERMISSION)


@pytest.mark.parametrize("topic, group, allowed", [
    ("t-sub", "g-any", True), ("t-both", "g-any", True), ("t-pub", "g-any", False), ("t-other", "g-any", False),
    ("t-sub", "g-deny", False)])
def test_pulls_need_sub_on_the_topic_and_the_group(client, topic, group, allowed):
    code = code_of(client, PULL, pull_fields(topic, group), READER)
    assert (code != NO_PERMISSION) if allowed else (code == NO_PERMISSION)


def test_offsets_and_heartbeats_name_their_groups_and_topics(client):
    assert code_of(client, QUERY_OFFSET, {"consumerGroup": "g-deny", "topic": "t-sub", "queueId": 0},
                   READER) == NO_PERMISSION
    assert code_of(client, QUERY_OFFSET, {"consumerGroup": "g-any", "topic": "t-sub", "queueId": 0},
                   READER) != NO_PERMISSION

    def heartbeat(group: str, topic: str) -> bytes:
        return json.dumps({"clientID": "acl-client", "producerDataSet": [], "consumerDataSet": [
            {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
             "subscriptionDataSet": [{"topic": topic, "subString": "*"}]}]}).encode()

    assert code_of(client, HEART_BEAT, {}, READER, heartbeat("g-any", "t-sub")) == SUCCESS
    assert code_of(client, HEART_BEAT, {}, READER, heartbeat("g-any", "t-pub")) == NO_PERMISSION
    assert code_of(client, HEART_BEAT, {}, READER, heartbeat("g-deny", "t-sub")) == NO_PERMISSION


def test_admin_requests_need_an_admin_account(client):
    fields = {"topic": "made-by-" + uuid.uuid4().hex[:6], "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    assert code_of(client, CREATE_TOPIC, fields, READER) == NO_PERMISSION
    assert code_of(client, CREATE_TOPIC, fields, Credentials("admin01", SECRET)) == SUCCESS
    # an admin account without topicPerms may use every topic
    assert code_of(client, SEND_V2, send_fields("t-deny"), Credentials("admin01", SECRET), b"x") == SUCCESS


@pytest.mark.parametrize("token, allowed", [("token-of-the-session", True), (None, False), ("another", False)])
def test_a_session_account_must_send_its_security_token(client, token, allowed):
    code = code_of(client, SEND_V2, send_fields("t-other"), Credentials("stsuser", SECRET, token), b"x")
    assert (code == SUCCESS) if allowed else (code == NO_PERMISSION)


def test_the_security_token_is_signed(client):
    signed = Credentials("stsuser", SECRET, "another").sign(send_fields("t-pub"), b"x")
    signed["SecurityToken"] = "token-of-the-session"      # the right token, put in after signing
    assert client.call(SEND_V2, signed, b"x").code == NO_PERMISSION


def test_a_white_remote_address_needs_no_signature(client):
    unsigned = dict(send_fields("t-deny"), AccessKey="trusted")
    assert client.call(SEND_V2, unsigned, b"x").code == SUCCESS
    assert client.call(SEND_V2, dict(send_fields("t-deny"), AccessKey="reader1"), b"x").code == NO_PERMISSION
    assert client.call(SEND_V2, send_fields("t-deny"), b"x").code == NO_PERMISSION      # no access key


def test_global_white_remote_addresses_let_anyone_in(tmp_path):
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"globalWhiteRemoteAddresses": ["127.0.0.*"],
                                "accounts": [{"accessKey": "reader1", "secretKey": SECRET}]}))
    options = {"rocketmq": {"acl_file": str(path)}}
    with rocketmq_broker(tmp_path / "data", front_end_options=options) as embedded:
        connection = Remoting(broker_address(embedded))
        try:
            assert connection.call(SEND_V2, send_fields("anyone"), b"x").code == SUCCESS
        finally:
            connection.close()


def test_a_changed_account_file_is_read_again(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    with rocketmq_broker(tmp_path / "data", front_end_options={"rocketmq": {"acl_file": str(path)}}) as embedded:
        connection = Remoting(broker_address(embedded))
        try:
            assert code_of(connection, SEND_V2, send_fields("t-other"), READER, b"x") == NO_PERMISSION
            path.write_text("accounts: [unclosed\n")       # a broken file changes nothing
            front = next(front for front in embedded.broker.front_ends if hasattr(front, "acl"))
            embedded.broker.loop.run_in_loop(front._reload_acl_file, timeout=10)
            assert code_of(connection, SEND_V2, send_fields("t-pub"), READER, b"x") == SUCCESS
            path.write_text(ACL_FILE.replace("defaultTopicPerm: DENY", "defaultTopicPerm: PUB"))
            wait_for(lambda: code_of(connection, SEND_V2, send_fields("t-other"), READER, b"x") == SUCCESS,
                     timeout=10, interval=0.2, message="the changed file was not read again")
        finally:
            connection.close()


def test_the_java_client_is_allowed_and_refused_per_permission(rmq, tmp_path):
    """One JVM: SessionCredentials with the session account's token send to each topic, and with a wrong token."""
    results, output = rocketmq_java.run(rmq.address("namesrv"), tmp_path / f"perms{uuid.uuid4().hex[:6]}",
                                        scenario="acl_perms", credentials=("stsuser", SECRET, "token-of-the-session"))
    assert "acl_perms" in results, f"the Java client's acl_perms scenario failed:\n{output[-6000:]}"
    refused = str(NO_PERMISSION)
    assert {key: value for key, value in results["acl_perms"].items() if key != "ms"} == {
        "t_pub": "sent", "t_sub": refused, "t_deny": refused, "wrong_token": refused}


# ---- the account file and the rules, without a broker ----------------------------------------------------------

def test_permissions_as_apache_checks_them():
    assert permitted(PUB, PUB) and permitted(SUB, PUB | SUB) and not permitted(SUB, PUB)
    assert not permitted(PUB, DENY | PUB) and not permitted(SUB, DENY)


@pytest.mark.parametrize("pattern, host, matches", [
    ("*", "192.168.1.1", True), ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.2", False),
    ("10.10.103.*", "10.10.103.77", True), ("10.10.*", "10.11.0.1", False), ("10.1.1.1-20", "10.1.1.20", True),
    ("10.1.1.1-20", "10.1.1.21", False), ("10.1.1.{1,5}", "10.1.1.5", True), ("10.1.1.{1,5}", "10.1.1.4", False),
    ("10.0.0.1,10.0.0.9", "10.0.0.9", True), ("", "127.0.0.1", False), ("127.0.0.1", "::1", False)])
def test_address_patterns(pattern, host, matches):
    assert AddressPattern(pattern).matches(host) is matches


@pytest.mark.parametrize("data, complaint", [
    ({"accounts": {"a": 1}}, "is a list"), ({"accounts": [{"accessKey": "short", "secretKey": SECRET}]}, "6"),
    ({"accounts": [{"accessKey": "reader1", "secretKey": SECRET, "topicPerms": ["t=ALL"]}]}, "permission"),
    ({"accounts": [{"accessKey": "reader1", "secretKey": SECRET, "groupPerms": ["nothing"]}]}, "NAME=PERM"),
    ({"accounts": [{"accessKey": "reader1", "secretKey": SECRET}] * 2}, "twice"),
    ({"globalWhiteRemoteAddresses": ["10.300.*"]}, "out of 0..255"), ([], "a mapping")])
def test_bad_account_files_are_refused_clearly(data, complaint):
    with pytest.raises(ConfigurationError, match=complaint):
        AclConfig.parse(data)


def test_an_unreadable_or_broken_file_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="cannot be read"):
        AclConfig.load(tmp_path / "missing.yml")
    (tmp_path / "broken.yml").write_text("accounts: [unclosed\n")
    with pytest.raises(ConfigurationError, match="does not parse"):
        AclConfig.load(tmp_path / "broken.yml")
    (tmp_path / "plain_acl.yml").write_text(ACL_FILE)
    assert sorted(AclConfig.load(tmp_path / "plain_acl.yml").accounts) == ["admin01", "reader1", "stsuser", "trusted"]


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
                           ["accounts", "globalWhiteRemoteAddresses", "accessKey", "secretKey", "admin",
                            "topicPerms", "groupPerms", "defaultTopicPerm", "whiteRemoteAddress", "securityToken"]),
                           inner, max_size=5), max_leaves=10)


@settings(max_examples=100, deadline=None)
@given(JSONISH)
def test_any_account_data_loads_or_is_a_configuration_error(data):
    try:
        AclConfig.parse(data)
    except ConfigurationError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789.*-{},: ab", max_size=30), st.ip_addresses(v=4).map(str))
def test_any_address_pattern_compiles_or_is_a_configuration_error(text, host):
    try:
        pattern = AddressPattern(text)
    except ConfigurationError:
        return
    assert pattern.matches(host) in (True, False)


def test_the_command_line_names_an_account_file(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--rocketmq", "127.0.0.1:0",
                                      "--rocketmq-acl-file", str(tmp_path / "plain_acl.yml")])
    assert broker_config(args).front_end_options == {"rocketmq": {"acl_file": str(tmp_path / "plain_acl.yml")}}
