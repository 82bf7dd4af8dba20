"""Request signing of RocketMQ's ACL 1.0 (AclClientRPCHook of the Java client; brokers with aclEnable=true check it).

Every request carries AccessKey (and SecurityToken when there is one) among its extFields, and Signature =
Base64(HmacSHA1(secretKey, the values of all other extFields in key order, as UTF-8, then the body)). The values
are signed as they travel: booleans lower case, numbers in decimal (the codec writes them so). A broker checks
a request by computing the same signature over what arrived (signature(), shared by both sides).

Session credentials (an STS token, the Java client's SessionCredentials with its securityToken) are
Credentials(access_key, secret_key, security_token): the token travels as the SecurityToken field and is signed
in its key order with the others, as AclClientRPCHook does. They expire: a client's `remoting.credentials`
(ClientInstance.remoting) may be replaced with fresh ones at any time; requests encoded from then on use them.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"


def field_text(value: Any) -> str:
    """An extFields value as the wire carries it (what fastmq.rocketmq._native.remoting.encode_frame writes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Credentials:
    """An access key pair of the broker's plain_acl.yml (or a session's, with its security token)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need an access key and a secret key")

    def sign(self, ext_fields: dict[str, Any] | None, body: Any = None) -> dict[str, str]:
        """ext_fields with AccessKey, SecurityToken and the Signature of the request added."""
        fields = {key: field_text(value) for key, value in (ext_fields or {}).items() if key != SIGNATURE}
        fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            fields[SECURITY_TOKEN] = self.security_token
        fields[SIGNATURE] = signature(self.secret_key, fields, body)
        return fields


def signature(secret_key: str, fields: dict[str, str], body: Any = None) -> str:
    """Base64(HmacSHA1(secret_key, the values of fields but Signature in key order, then the body))."""
    content = "".join(fields[key] for key in sorted(fields) if key != SIGNATURE).encode("utf-8")
    if body is not None:
        content += bytes(body)
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")
