"""ACL signing (fastmq/rocketmq/acl.py) against an Apache RocketMQ broker with authentication on (5.x checks the
AccessKey/Signature of ACL 1.0 clients with its DefaultAuthenticationProvider): signed requests send and pull, a
wrong secret and a missing key are refused with NO_PERMISSION. A cluster of its own for this module."""
from __future__ import annotations

import pytest

from fastmq.rocketmq import Credentials, Message, Producer, PullConsumer, SendFailedError, SendStatus, compat
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from tests.support.rocketmq import RocketMQCluster, call, unique
from tests.support.servers import SERVER_LOGS
from tests.support.waiting import wait_for

USER, PASSWORD = "fastmq", "fastmq-secret"
AUTHENTICATION = {
    "authenticationEnabled": "true",
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider":
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "initAuthenticationUser": f'{{"username":"{USER}","password":"{PASSWORD}"}}',
    # the broker's own requests (registration with the namesrv, its inner clients) sign with these
    "innerClientAuthenticationCredentials": f'{{"accessKey":"{USER}","secretKey":"{PASSWORD}"}}',
}


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    with RocketMQCluster(tmp_path_factory.mktemp("apache-rocketmq-acl"), properties=AUTHENTICATION) as cluster:
        SERVER_LOGS["acl_server"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["acl_server"]


def test_signed_requests_send_and_pull(acl_server):
    topic = unique("acl")
    credentials = Credentials(USER, PASSWORD)
    with Producer(unique("acl-producer"), acl_server.namesrv_addr, credentials=credentials,
                  send_timeout=10.0) as producer:
        sent = producer.send(Message(topic, b"signed", tags="T"))
    with PullConsumer(unique("acl-consumer"), acl_server.namesrv_addr, credentials=credentials,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        consumer.subscribe(topic)
        pulled: list = []
        wait_for(lambda: pulled.extend(consumer.poll(0.2)) or pulled, timeout=20, message="nothing pulled")
        consumer.commit()
    assert [(m.body, m.msg_id) for m in pulled] == [(b"signed", sent.msg_id)]


@pytest.mark.parametrize("credentials", [Credentials(USER, "wrong"), None], ids=["wrong-secret", "unsigned"])
def test_bad_or_missing_signature_is_refused(acl_server, credentials):
    with Producer(unique("acl-producer"), acl_server.namesrv_addr, credentials=credentials, send_timeout=5.0,
                  retry_times=0) as producer:
        with pytest.raises(SendFailedError) as refused:
            producer.send(Message(unique("acl"), b"refused"))
    assert refused.value.code == ResponseCode.NO_PERMISSION


def test_session_credentials_sign_their_token_and_can_be_replaced(acl_server):
    topic = unique("acl-sts")
    session = Credentials(USER, PASSWORD, "sts-session-token")
    with Producer(unique("acl-sts"), acl_server.namesrv_addr, credentials=session, send_timeout=10.0,
                  retry_times=0) as producer:
        assert producer.send(Message(topic, b"with a token")).status is SendStatus.SEND_OK
        producer.remoting.credentials = Credentials(USER, "expired", "old-token")
        with pytest.raises(SendFailedError) as refused:
            producer.send(Message(topic, b"refused"))
        assert refused.value.code == ResponseCode.NO_PERMISSION
        producer.remoting.credentials = Credentials(USER, PASSWORD, "renewed-token")
        assert producer.send(Message(topic, b"renewed")).status is SendStatus.SEND_OK


def test_the_broker_checks_the_signed_token(acl_server):
    # the token is part of what is signed: one added after signing (or changed) no longer matches
    fields = {"topic": unique("acl-sts"), "queueId": 0}
    signed = Credentials(USER, PASSWORD, "sts-session-token").sign(fields)
    added = dict(Credentials(USER, PASSWORD).sign(fields), SecurityToken="sts-session-token")
    codes = [call(acl_server.broker_addr, RequestCode.GET_MAX_OFFSET, request, timeout=10).code
             for request in (signed, added)]
    assert codes[0] != ResponseCode.NO_PERMISSION and codes[1] == ResponseCode.NO_PERMISSION


def test_compat_session_credentials(acl_server):
    topic = unique("acl-compat")
    producer = compat.Producer(unique("acl-compat"))
    producer.set_namesrv_addr(acl_server.namesrv_addr)
    producer.set_session_credentials(USER, PASSWORD, "LOCAL")
    producer.start()
    try:
        message = compat.Message(topic)
        message.set_body("signed by the compat face")
        assert producer.send_sync(message).status == compat.SendStatus.OK
    finally:
        producer.shutdown()


def test_credentials_need_both_keys():
    with pytest.raises(ValueError):
        Credentials(USER, "")
