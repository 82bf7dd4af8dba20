"""ACL 1.0 of the RocketMQ broker front end (broker.conf's aclEnable with plain_acl.yml; RocketMQ options acl_enable
and acl_file), as Apache RocketMQ's PlainAccessValidator checks it.

Every request a client sends carries AccessKey, Signature and, for a session (STS) account, SecurityToken among
its extFields (fastmq.rocketmq.acl says how the signature is computed: it covers every field but itself, the
token included, and the body). A request is checked in this order:

1. its peer's IPv4 address matches one of globalWhiteRemoteAddresses: allowed, nothing else checked;
2. no AccessKey: refused ("No accessKey is configured"); an access key no account has: refused;
3. the peer matches the account's whiteRemoteAddress: allowed, nothing else checked;
4. the signature must match the account's secret key; an account with a securityToken (a session account, our
   addition: plain_acl.yml has no such key, and Apache 4.9's plain validator signs the token but compares it
   with nothing) must send that token;
5. admin requests (create/delete topic, update broker config, create/delete subscription group) need an admin
   account; then every resource the request names needs its permission: a topic (PUB to send, SUB to pull or
   commit offsets) from topicPerms, else defaultTopicPerm; a group (always SUB, as its %RETRY% topic) from
   groupPerms, else defaultGroupPerm. A permission of DENY refuses, PUB|SUB allows both. An admin account
   without topicPerms and groupPerms may use everything. A send to RMQ_SYS_TRACE_TOPIC needs no permission.

Which request names which resources follows Apache 4.9's PlainAccessValidator (SEND 10 / V2 310: the topic PUB,
or for a %RETRY% topic the sending group SUB; PULL 11: topic and group SUB; QUERY_MESSAGE 12: topic SUB;
UPDATE_CONSUMER_OFFSET 15: topic and group SUB; HEART_BEAT 34: every consumer group and subscribed topic SUB;
UNREGISTER_CLIENT 35, CONSUMER_SEND_MSG_BACK 36, GET_CONSUMER_LIST_BY_GROUP 38: the group SUB), plus two that
Apache 4.9 leaves to the signature alone: SEND_BATCH_MESSAGE 320 (the topic PUB, as a single send) and
QUERY_CONSUMER_OFFSET 14 (as 15). A refused request is answered NO_PERMISSION (16) with the reason as remark,
as Apache RocketMQ 5 answers (4.9 answered SYSTEM_ERROR with the AclException's text), and nothing of it is done.

The account file is read again when it changes (checked every second by the front end; a file that does not
load leaves the accounts as they were). Without an account file the accounts are the broker's users (BrokerConfig.users, access key = user name, secret
key = password), admin accounts that may use every topic and group.
"""
from __future__ import annotations

import dataclasses
import hmac
import importlib
import ipaddress
import json
import os
from typing import Any

from fastmq.broker.rocketmq.consumers import heartbeat_data
from fastmq.broker.rocketmq.remoting import Handler, Request, RequestError
from fastmq.broker.rocketmq.system_topics import RETRY_PREFIX, retry_topic
from fastmq.errors import ConfigurationError
from fastmq.rocketmq.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, signature
from fastmq.rocketmq.protocol import RequestCode, ResponseCode

# Permission bits of rocketmq-acl's Permission.
DENY, ANY, PUB, SUB = 1, 2, 4, 8
PERMISSIONS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
# UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP,
# DELETE_TOPIC_IN_BROKER.
ADMIN_CODES = frozenset({17, 25, 200, 207, 215})
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
QUERY_MESSAGE = 12
MIN_KEY_LENGTH = 6


def permission(text: Any, what: str) -> int:
    """A permission's bits from its name (PUB, SUB, PUB|SUB, DENY)."""
    bits = PERMISSIONS.get(text.strip().upper()) if isinstance(text, str) else None
    if bits is None:
        raise ConfigurationError(f"{what}: a permission is one of {sorted(PERMISSIONS)}, not {text!r}")
    return bits


def permitted(needed: int, owned: int) -> bool:
    """rocketmq-acl's Permission.checkPermission: DENY refuses everything, ANY wants PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


class AddressPattern:
    """A whiteRemoteAddress: "*" (any), an IPv4 address whose parts are numbers, "a-b" ranges or "*", the last
    part possibly "{a,b,c}", or several such patterns separated by commas. Blank matches nothing."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._any = self.text in ("*", "*.*.*.*")
        self._alternatives = [] if self._any or not self.text else [
            self._parts(choice.strip()) for choice in self._expand(self.text)]

    @staticmethod
    def _expand(text: str) -> list[str]:
        if text.endswith("}"):
            prefix, brace, rest = text.partition("{")
            if not brace or not prefix.endswith("."):
                raise ConfigurationError(f"whiteRemoteAddress {text!r}: braces hold the last part, a.b.c.{{1,2}}")
            return [prefix + choice for choice in rest[:-1].split(",")]
        return text.split(",")

    def _parts(self, text: str) -> list[tuple[int, int]]:
        parts = text.split(".")
        if len(parts) > 4 or (len(parts) < 4 and parts[-1] != "*"):
            raise ConfigurationError(f"whiteRemoteAddress {self.text!r}: {text!r} is not an IPv4 address pattern")
        parts += ["*"] * (4 - len(parts))
        ranges = []
        for part in parts:
            low, dash, high = part.partition("-")
            try:
                bounds = (0, 255) if part == "*" else (int(low), int(high) if dash else int(low))
            except ValueError:
                raise ConfigurationError(f"whiteRemoteAddress {self.text!r}: bad part {part!r}") from None
            if not 0 <= bounds[0] <= bounds[1] <= 255:
                raise ConfigurationError(f"whiteRemoteAddress {self.text!r}: part {part!r} is out of 0..255")
            ranges.append(bounds)
        return ranges

    def matches(self, host: str | None) -> bool:
        if self._any:
            return True
        if not self._alternatives or host is None:
            return False
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            return False
        octets = address.packed
        return any(all(low <= octet <= high for octet, (low, high) in zip(octets, ranges))
                   for ranges in self._alternatives)


@dataclasses.dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: dict[str, int] = dataclasses.field(default_factory=dict)   # topic, or %RETRY%group -> permission
    white_address: AddressPattern | None = None
    security_token: str | None = None

    def may(self, resource: str, needed: int) -> bool:
        if resource in self.perms:
            return permitted(needed, self.perms[resource])
        default = self.default_group_perm if resource.startswith(RETRY_PREFIX) else self.default_topic_perm
        return permitted(needed, default)


@dataclasses.dataclass(frozen=True)
class AclConfig:
    accounts: dict[str, Account]
    global_white: tuple[AddressPattern, ...] = ()

    @classmethod
    def of_users(cls, users: dict[str, str]) -> AclConfig:
        """The broker's users as admin accounts that may use everything."""
        return cls({name: Account(name, password, admin=True) for name, password in users.items()})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AclConfig:
        """An account file in plain_acl.yml's shape: YAML (needs PyYAML), or the same structure as JSON."""
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise ConfigurationError(f"the RocketMQ ACL file cannot be read: {exc}") from None
        if text.lstrip().startswith("{"):
            try:
                return cls.parse(json.loads(text), str(path))
            except ValueError as exc:
                raise ConfigurationError(f"{path} does not parse: {exc}") from None
        try:
            yaml = importlib.import_module("yaml")    # PyYAML is no dependency of fastmq: asked for here only
        except ImportError:
            raise ConfigurationError(f"{path} is YAML: install PyYAML (pip install pyyaml) or write the same "
                                     "structure as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{path} does not parse: {exc}") from None
        return cls.parse(data, str(path))

    @classmethod
    def parse(cls, data: Any, where: str = "the ACL config") -> AclConfig:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigurationError(f"{where}: a mapping with accounts and globalWhiteRemoteAddresses")
        white = _strings(data.get("globalWhiteRemoteAddresses"), f"{where}: globalWhiteRemoteAddresses")
        accounts: dict[str, Account] = {}
        for entry in _list(data.get("accounts"), f"{where}: accounts"):
            account = _account(entry, where)
            if account.access_key in accounts:
                raise ConfigurationError(f"{where}: the access key {account.access_key} is there twice")
            accounts[account.access_key] = account
        return cls(accounts, tuple(AddressPattern(text) for text in white))


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigurationError(f"{what} is a list, not {type(value).__name__}")
    return value


def _strings(value: Any, what: str) -> list[str]:
    items = _list(value, what)
    if not all(isinstance(item, str) for item in items):
        raise ConfigurationError(f"{what} holds strings")
    return items


def _key(entry: dict[str, Any], name: str, where: str) -> str:
    key = entry.get(name)
    if not isinstance(key, str) or len(key) < MIN_KEY_LENGTH:
        shown = f"{len(key)} characters" if isinstance(key, str) else type(key).__name__   # no secret in a log
        raise ConfigurationError(f"{where}: an account's {name} is a string of {MIN_KEY_LENGTH} characters or more, "
                                 f"not {shown}")
    return key


def _account(entry: Any, where: str) -> Account:
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: an account is a mapping, not {type(entry).__name__}")
    access_key, secret_key = _key(entry, "accessKey", where), _key(entry, "secretKey", where)
    what = f"{where}: account {access_key}"
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise ConfigurationError(f"{what}: admin is true or false, not {admin!r}")
    perms: dict[str, int] = {}
    for key, to_resource in (("topicPerms", str), ("groupPerms", retry_topic)):
        for item in _strings(entry.get(key), f"{what}: {key}"):
            name, equals, perm = item.partition("=")
            if not equals or not name.strip():
                raise ConfigurationError(f"{what}: {key} entries are NAME=PERM, e.g. topicA=SUB, not {item!r}")
            perms[to_resource(name.strip())] = permission(perm, f"{what}: {key} {item!r}")
    white = entry.get("whiteRemoteAddress")
    token = entry.get("securityToken")
    if white is not None and not isinstance(white, str) or token is not None and not isinstance(token, str):
        raise ConfigurationError(f"{what}: whiteRemoteAddress and securityToken are strings")
    return Account(access_key, secret_key, admin,
                   permission(entry.get("defaultTopicPerm", "DENY"), f"{what}: defaultTopicPerm"),
                   permission(entry.get("defaultGroupPerm", "DENY"), f"{what}: defaultGroupPerm"),
                   perms, AddressPattern(white) if white else None, token or None)


def resources(request: Request) -> dict[str, int]:
    """What a request names: {topic, or %RETRY%group for a group: the permission it needs}."""
    fields, code = request.fields, request.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            needed[resource] = needed.get(resource, 0) | perm

    def add_group(group: str | None) -> None:
        if group:
            add(retry_topic(group), SUB)

    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        v2 = code == RequestCode.SEND_MESSAGE_V2 or "b" in fields and "topic" not in fields
        topic, group = (fields.get("b"), fields.get("a")) if v2 else (fields.get("topic"), fields.get("producerGroup"))
        if topic is not None and topic.startswith(RETRY_PREFIX):
            # Apache names the producer group here; a consumer sending a message back names its own group
            add_group(group)
        else:
            add(topic, PUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(fields.get("topic"), SUB)
        add_group(fields.get("consumerGroup"))
    elif code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
        add(fields.get("topic"), SUB)
        add_group(fields.get("consumerGroup"))
    elif code == QUERY_MESSAGE:
        add(fields.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        for consumer in heartbeat_data(request).consumers:
            add_group(consumer.group)
            for topic in consumer.subscriptions:
                add(topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add_group(fields.get("consumerGroup"))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add_group(fields.get("group"))
    return needed


def _refuse(reason: str) -> RequestError:
    return RequestError(reason, ResponseCode.NO_PERMISSION)


class AccessChecker:
    """Checks each request against the accounts (the module's docstring says how)."""

    def __init__(self, config: AclConfig) -> None:
        self.config = config

    def check(self, request: Request) -> None:
        peer = request.conn.peer
        host = peer[0] if isinstance(peer, tuple) else None
        if any(pattern.matches(host) for pattern in self.config.global_white):
            return
        fields = request.fields
        access_key = fields.get(ACCESS_KEY)
        if access_key is None:
            raise _refuse("No accessKey is configured: the broker has ACL on, sign requests with credentials")
        account = self.config.accounts.get(access_key)
        if account is None:
            raise _refuse(f"No acl config for {access_key}")
        if account.white_address is not None and account.white_address.matches(host):
            return
        sent = fields.get(SIGNATURE) or ""
        expected = signature(account.secret_key, fields, request.body)
        if not hmac.compare_digest(expected.encode("ascii"), sent.encode("utf-8", "replace")):
            raise _refuse(f"Check signature failed for accessKey={access_key}")
        if account.security_token is not None and not hmac.compare_digest(
                account.security_token.encode("utf-8"), (fields.get(SECURITY_TOKEN) or "").encode("utf-8")):
            raise _refuse(f"the security token of accessKey={access_key} is missing or does not match")
        if request.code in ADMIN_CODES and not account.admin:
            raise _refuse(f"Need admin permission for request code={request.code}, but accessKey={access_key} "
                          "is not")
        needed = resources(request)
        if needed.get(TRACE_TOPIC) == PUB or (account.admin and not account.perms):
            return
        for resource, perm in needed.items():
            if not account.may(resource, perm):
                kind = f"group={resource[len(RETRY_PREFIX):]}" if resource.startswith(RETRY_PREFIX) \
                    else f"topic={resource}"
                raise _refuse(f"No default permission for {kind} (accessKey={access_key})")

    def guard(self, handler: Handler) -> Handler:
        """handler, run only for requests that pass the check."""
        def checked(request: Request) -> None:
            self.check(request)
            handler(request)
        return checked
