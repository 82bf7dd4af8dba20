"""What the admin's ACL and SCRAM operations take and answer, with kafka-python 3.x's names and values
(kafka.admin's ResourceType, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter,
ResourcePattern, ACLFilter, ACL, ScramMechanism, UserScramCredentialUpsertion, UserScramCredentialDeletion).

A filter (ResourcePatternFilter, ACLFilter) may hold the ANY values and matches many bindings; a concrete
pattern or ACL (ResourcePattern, ACL) names one binding and refuses them. Bad values raise
IllegalArgumentError when the object is made, as kafka-python's do. Objects are compared by their fields, so
kafka-python's own ACL objects equal fastmq's.
"""
from __future__ import annotations

import hashlib
import os
from enum import IntEnum
from typing import Any

from fastmq.kafka.errors import IllegalArgumentError

__all__ = ["ACL", "ACLFilter", "ACLOperation", "ACLPermissionType", "ACLResourcePatternType", "ResourcePattern",
           "ResourcePatternFilter", "ResourceType", "ScramMechanism", "UserScramCredentialDeletion",
           "UserScramCredentialUpsertion", "acl_from_wire"]


class ResourceType(IntEnum):
    """What an ACL is about; ANY only in filters, USER from DescribeAcls/CreateAcls/DeleteAcls v3."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ACLOperation(IntEnum):
    """The operation an ACL allows or denies; ANY only in filters."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ACLPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ACLResourcePatternType(IntEnum):
    """How a resource name matches (KIP-290): LITERAL the name itself (or "*"), PREFIXED names starting with it;
    in filters ANY takes every pattern, MATCH the patterns that would apply to the name."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


def _member(enum: type[IntEnum], value: Any, what: str) -> Any:
    if not isinstance(value, IntEnum) or type(value).__name__ != enum.__name__:
        raise IllegalArgumentError(f"{what} must be a {enum.__name__}, not {value!r}")
    return enum(int(value))


class _ComparedByFields:
    """Equal to any object (fastmq's or kafka-python's) with the same values of FIELDS; hashed by them."""

    FIELDS: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        try:
            return self._key() == tuple(getattr(other, name) for name in self.FIELDS)
        except AttributeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())


class ResourcePatternFilter(_ComparedByFields):
    """Resources an ACL filter matches: type (ANY: all), name (None: any) and pattern type."""

    FIELDS = ("resource_type", "resource_name", "pattern_type")

    def __init__(self, resource_type: ResourceType, resource_name: str | None,
                 pattern_type: ACLResourcePatternType) -> None:
        self.resource_type = _member(ResourceType, resource_type, "resource_type")
        self.resource_name = resource_name
        self.pattern_type = _member(ACLResourcePatternType, pattern_type, "pattern_type")

    def __repr__(self) -> str:
        return (f"<ResourcePattern type={self.resource_type.name}, name={self.resource_name}, "
                f"pattern={self.pattern_type.name}>")


class ResourcePattern(ResourcePatternFilter):
    """One resource pattern: a concrete type, a name, LITERAL (the default) or PREFIXED."""

    def __init__(self, resource_type: ResourceType, resource_name: str,
                 pattern_type: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> None:
        super().__init__(resource_type, resource_name, pattern_type)
        if self.resource_type == ResourceType.ANY:
            raise IllegalArgumentError("resource_type cannot be ANY in a ResourcePattern")
        if self.pattern_type in (ACLResourcePatternType.ANY, ACLResourcePatternType.MATCH):
            raise IllegalArgumentError(f"pattern_type cannot be {self.pattern_type.name} in a ResourcePattern")


class ACLFilter(_ComparedByFields):
    """ACL bindings to describe or delete: principal and host (None: any), operation and permission (ANY: any),
    and a ResourcePatternFilter."""

    FIELDS = ("principal", "host", "operation", "permission_type", "resource_pattern")

    def __init__(self, principal: str | None, host: str | None, operation: ACLOperation,
                 permission_type: ACLPermissionType, resource_pattern: ResourcePatternFilter) -> None:
        self.principal = principal
        self.host = host
        self.operation = _member(ACLOperation, operation, "operation")
        self.permission_type = _member(ACLPermissionType, permission_type, "permission_type")
        if not all(hasattr(resource_pattern, name) for name in ResourcePatternFilter.FIELDS):
            raise IllegalArgumentError(f"resource_pattern must be a ResourcePatternFilter, not {resource_pattern!r}")
        self.resource_pattern = resource_pattern

    def __repr__(self) -> str:
        return (f"<ACL principal={self.principal}, resource={self.resource_pattern}, "
                f"operation={self.operation.name}, type={self.permission_type.name}, host={self.host}>")


class ACL(ACLFilter):
    """One ACL binding: who (principal, e.g. "User:alice", and host, "*" for any) may or may not do which
    operation on a ResourcePattern."""

    def __init__(self, principal: str, host: str, operation: ACLOperation, permission_type: ACLPermissionType,
                 resource_pattern: ResourcePattern) -> None:
        super().__init__(principal, host, operation, permission_type, resource_pattern)
        if self.operation == ACLOperation.ANY:
            raise IllegalArgumentError("operation cannot be ANY in an ACL")
        if self.permission_type == ACLPermissionType.ANY:
            raise IllegalArgumentError("permission_type cannot be ANY in an ACL")
        if type(resource_pattern).__name__ != "ResourcePattern":
            raise IllegalArgumentError(f"resource_pattern of an ACL must be a ResourcePattern, not {resource_pattern!r}")


def acl_from_wire(struct: Any, resource_type: int, resource_name: str, pattern_type: int) -> ACL:
    """An ACL from a DescribeAcls or DeleteAcls answer (principal, host, operation, permission_type)."""
    return ACL(struct.principal, struct.host, ACLOperation(struct.operation),
               ACLPermissionType(struct.permission_type),
               ResourcePattern(ResourceType(resource_type), resource_name, ACLResourcePatternType(pattern_type)))


class ScramMechanism(IntEnum):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def hash_name(self) -> str:
        """The hashlib name of the mechanism's hash."""
        if self is ScramMechanism.UNKNOWN:
            raise IllegalArgumentError("the UNKNOWN SCRAM mechanism has no hash")
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def of(cls, value: Any) -> ScramMechanism:
        """A mechanism from itself, its value or its name ("SCRAM-SHA-256", "scram_sha_512")."""
        try:
            if isinstance(value, str):
                return cls[value.upper().replace("-", "_")]
            return cls(value)
        except (KeyError, ValueError):
            raise IllegalArgumentError(f"unknown SCRAM mechanism {value!r}") from None


class UserScramCredentialDeletion:
    """Remove a user's credential of one SCRAM mechanism."""

    def __init__(self, user: str, mechanism: Any) -> None:
        self.user = user
        self.mechanism = ScramMechanism.of(mechanism)

    def __repr__(self) -> str:
        return f"UserScramCredentialDeletion({self.user}, {self.mechanism.name})"


class UserScramCredentialUpsertion:
    """Set a user's credential of one SCRAM mechanism. Only the salted password leaves this process: PBKDF2-HMAC
    of the password with the salt (24 random bytes unless given) over `iterations` rounds (RFC 5802)."""

    DEFAULT_ITERATIONS = 4096

    def __init__(self, user: str, mechanism: Any, password: str | bytes, iterations: int | None = None,
                 salt: bytes | None = None) -> None:
        self.user = user
        self.mechanism = ScramMechanism.of(mechanism)
        if self.mechanism is ScramMechanism.UNKNOWN:
            raise IllegalArgumentError("a SCRAM credential needs a mechanism, not UNKNOWN")
        self.iterations = self.DEFAULT_ITERATIONS if iterations is None else iterations
        self.salt = os.urandom(24) if salt is None else salt
        secret = password.encode("utf-8") if isinstance(password, str) else password
        self.salted_password = hashlib.pbkdf2_hmac(self.mechanism.hash_name, secret, self.salt, self.iterations)

    def __repr__(self) -> str:
        return f"UserScramCredentialUpsertion({self.user}, {self.mechanism.name}, iterations={self.iterations})"
