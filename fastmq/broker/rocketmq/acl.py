"""ACL 1.0 authentication of the RocketMQ broker front end (broker.conf's aclEnable; RocketMQ option acl_enable).

The accounts are the broker's users (BrokerConfig.users: `fastmq broker --users-file`, $FASTMQ_BROKER_USERS or
`--user`), an access key being a user name and its secret key the password. Every request a client sends must
carry AccessKey and Signature among its extFields (fastmq.rocketmq.acl says how it is computed); a request
without them, from an unknown access key or with a signature that does not match is answered NO_PERMISSION,
as Apache RocketMQ 5.x answers ACL 1.0 clients, and nothing of it is done. Only authentication: every account
may use every topic and group (plain_acl.yml's per-topic permissions are not read).
"""
from __future__ import annotations

import hmac

from fastmq.broker.rocketmq.remoting import Handler, Request, RequestError
from fastmq.rocketmq.acl import ACCESS_KEY, SIGNATURE, signature
from fastmq.rocketmq.protocol import ResponseCode


class AccessChecker:
    """Checks the signature of each request against the secret key of its access key."""

    def __init__(self, accounts: dict[str, str]) -> None:
        self._secret_keys = dict(accounts)     # access key -> secret key

    def check(self, request: Request) -> None:
        fields = request.fields
        access_key = fields.get(ACCESS_KEY)
        sent = fields.get(SIGNATURE)
        if access_key is None or sent is None:
            raise RequestError("No accessKey is configured: the broker has ACL on, sign requests with "
                               "credentials", ResponseCode.NO_PERMISSION)
        secret_key = self._secret_keys.get(access_key)
        if secret_key is None:
            raise RequestError(f"No acl config for {access_key}", ResponseCode.NO_PERMISSION)
        expected = signature(secret_key, fields, request.body)
        if not hmac.compare_digest(expected.encode("ascii"), sent.encode("utf-8", "replace")):
            raise RequestError(f"Check signature failed for accessKey={access_key}", ResponseCode.NO_PERMISSION)

    def guard(self, handler: Handler) -> Handler:
        """handler, run only for requests whose signature checks."""
        def checked(request: Request) -> None:
            self.check(request)
            handler(request)
        return checked
