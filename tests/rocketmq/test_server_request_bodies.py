"""The bodies of fastmq/rocketmq/server_requests.py: ConsumerRunningInfo and ResetOffsetBody written as fastjson
writes them (MessageQueue objects as map keys) read back whole, and anything else is refused with
CorruptDataError; ACL signatures."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import CorruptDataError
from fastmq.rocketmq import Credentials
from fastmq.rocketmq.route import MessageQueue
from fastmq.rocketmq.server_requests import (
    parse_reset_offset_body,
    parse_running_info,
    reset_offset_body,
    running_info_json,
)

names = st.text(min_size=1, max_size=12)
queues = st.builds(MessageQueue, names, names, st.integers(0, 1023))
queue_infos = st.fixed_dictionaries({"commitOffset": st.integers(-1, 2**62), "cachedMsgCount": st.integers(0, 1000),
                                     "locked": st.booleans()})


@given(st.dictionaries(queues, queue_infos, max_size=6), st.dictionaries(names, names, max_size=4))
@settings(max_examples=100, deadline=None)
def test_running_info_reads_back(table, properties):
    info = {"properties": properties, "subscriptionSet": [{"topic": "t", "subString": "*"}], "mqTable": table}
    body = running_info_json(info, jstack=False)
    assert body.startswith(b'{"mqTable":{') and (not table or b'{{"brokerName":' in body)
    back = parse_running_info(body)
    assert back["mqTable"] == table and back["properties"] == properties and back["statusTable"] == {}


def test_running_info_with_thread_stacks():
    body = running_info_json({"properties": {}, "subscriptionSet": [], "mqTable": {}}, jstack=True)
    assert "MainThread" in parse_running_info(body)["jstack"]


@given(st.binary(max_size=120))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_parse_or_raise_corrupt_data(data):
    for parse in (parse_running_info, parse_reset_offset_body):
        try:
            parse(data)
        except CorruptDataError:
            pass


@given(st.dictionaries(queues, st.integers(0, 2**63 - 1), max_size=8))
@settings(max_examples=40, deadline=None)
def test_reset_offset_body_reads_back(offsets):
    body = reset_offset_body(offsets)
    assert body.startswith(b'{"offsetTable":{')
    assert parse_reset_offset_body(body) == offsets


@pytest.mark.parametrize("body", [b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:-1}}',
                                  b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:"1"}}',
                                  b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:true}}',
                                  b'{"offsetTable":{"t":1}}', b'{"offsetTable":[]}', b"{}"])
def test_malformed_reset_offset_body_is_refused(body):
    with pytest.raises(CorruptDataError):
        parse_reset_offset_body(body)


@pytest.mark.parametrize("body", [b"[]", b"{", b'{"mqTable": 5}', b'{"x": 1}', b"\xff",
                                  b'{"mqTable":{{"brokerName":"b","queueId":0,"topic":"t"}:1,"0":2}}'])
def test_malformed_running_info_is_refused(body):
    with pytest.raises(CorruptDataError):
        parse_running_info(body)


def test_signature_covers_sorted_values_then_the_body():
    # what the Java client's AclClientRPCHook signs: every extFields value but Signature, in key order, then the
    # body (the signature's acceptance by a real broker is tests/rocketmq/test_acl.py)
    signed = Credentials("ak", "sk").sign({"topic": "t", "queueId": 3, "batch": False}, b"body")
    content = b"ak" + b"false" + b"3" + b"t" + b"body"      # AccessKey, batch, queueId, topic
    expected = base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    assert signed == {"topic": "t", "queueId": "3", "batch": "false", "AccessKey": "ak", "Signature": expected}


def test_a_session_token_is_signed_in_its_key_order():
    # SessionCredentials' securityToken: AclClientRPCHook puts SecurityToken beside AccessKey into the sorted map
    # it signs (upper-case keys sort first, as Java's String.compareTo orders them)
    signed = Credentials("ak", "sk", "sts-token").sign({"topic": "t", "queueId": 3, "Zone": "z"}, b"body")
    content = b"ak" + b"sts-token" + b"z" + b"3" + b"t" + b"body"     # AccessKey, SecurityToken, Zone, queueId, topic
    expected = base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    assert signed["SecurityToken"] == "sts-token" and signed["Signature"] == expected
    assert signed["Signature"] != Credentials("ak", "sk").sign({"topic": "t", "queueId": 3, "Zone": "z"},
                                                               b"body")["Signature"]
