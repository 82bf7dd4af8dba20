"""What fastmq.kafka.admin.Admin is given and what it answers: kafka-python's enumerations (names and values),
the descriptions of topics, partitions and configuration resources a caller passes in, and the results the admin
returns. Kept apart from the client so that both read as one thing each."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Iterable, Mapping, TypeVar

from fastmq.kafka import errors as kerrors
from fastmq.kafka.cluster import BrokerInfo

_E = TypeVar("_E", bound=IntEnum)

# ---- enumerations (kafka-python's names and values) -------------------------------------------------------

class ConfigResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs operations; APPEND and SUBTRACT apply to list-valued configurations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSourceType(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8

    def is_modified(self) -> bool:
        """Set explicitly (not a default or a static broker setting)."""
        return self not in (ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSourceType.STATIC_BROKER_CONFIG,
                            ConfigSourceType.DEFAULT_CONFIG)

    @classmethod
    def dynamic_for(cls, resource_type: ConfigResourceType | int) -> ConfigSourceType:
        """The source of a value set on a resource of this type (DescribeConfigs v0 reports no source)."""
        return _DYNAMIC_SOURCES.get(resource_type, cls.UNKNOWN)


# Keyed by the enum; an IntEnum hashes as its int, so a plain int code finds the same entry.
_DYNAMIC_SOURCES: dict[ConfigResourceType | int, ConfigSourceType] = {
    ConfigResourceType.TOPIC: ConfigSourceType.DYNAMIC_TOPIC_CONFIG,
    ConfigResourceType.BROKER: ConfigSourceType.DYNAMIC_BROKER_CONFIG,
    ConfigResourceType.BROKER_LOGGER: ConfigSourceType.DYNAMIC_BROKER_LOGGER_CONFIG,
    ConfigResourceType.CLIENT_METRICS: ConfigSourceType.DYNAMIC_CLIENT_METRICS_CONFIG,
    ConfigResourceType.GROUP: ConfigSourceType.DYNAMIC_GROUP_CONFIG,
}


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


def enum_member(enum_cls: type[_E], value: Any, what: str) -> _E:
    """An enum member from itself, its name (any case) or its value; ValueError naming the choices."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        member = enum_cls.__members__.get(value.upper().replace("-", "_"))
        if member is not None:
            return member
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    raise ValueError(f"{what} must be one of {', '.join(enum_cls.__members__)}, not {value!r}")


def _enum_or_int(enum_cls: type[_E], value: int) -> _E | int:
    """A wire value as its enum member, or the plain int when a newer broker sends a value we do not know."""
    try:
        return enum_cls(value)
    except ValueError:
        return value


# ---- what the caller describes ------------------------------------------------------------------------------

@dataclass
class NewTopic:
    """A topic to create. -1 for num_partitions / replication_factor lets the broker choose (Kafka 2.4+), and
    is required with replica_assignments ({partition: [broker ids]})."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: dict[int, list[int]] = None  # type: ignore[assignment]  # None: {} (kafka-python's default)
    topic_configs: dict[str, str | None] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.replica_assignments is None:
            self.replica_assignments = {}
        if self.topic_configs is None:
            self.topic_configs = {}


@dataclass
class NewPartitions:
    """The new total partition count of a topic, and optionally the replicas of each added partition."""

    total_count: int
    new_assignments: list[list[int]] | None = None


class ConfigResource:
    """A resource whose configuration is described or altered. resource_type is a ConfigResourceType or its
    name; configs is, for describe, the keys to read (None: all), for alter a {key: value} mapping, and for
    incremental alter {key: value or (AlterConfigOp, value)}."""

    def __init__(self, resource_type: ConfigResourceType | str | int, name: str,
                 configs: Mapping[str, Any] | Iterable[str] | None = None) -> None:
        self.resource_type = enum_member(ConfigResourceType, resource_type, "resource_type")
        self.name = name
        self.configs = configs

    @property
    def key(self) -> tuple[ConfigResourceType, str]:
        return self.resource_type, self.name

    def __str__(self) -> str:
        return f"ConfigResource {self.name}={self.resource_type}"

    def __repr__(self) -> str:
        return f"ConfigResource({self.resource_type}, {self.name}, {self.configs})"


# ---- what the admin returns -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int                       # -1 when the cluster names none
    brokers: tuple[BrokerInfo, ...]
    authorized_operations: int | None = None  # Kafka's ACL operation bitfield, when requested and given


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSourceType | int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None                        # None when sensitive, or unset without a default
    source: ConfigSourceType | int
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: ConfigType | int = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return not (isinstance(self.source, ConfigSourceType) and self.source.is_modified())


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: kerrors.KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1                 # as created (or validated); -1 from brokers before Kafka 2.4
    replication_factor: int = -1
    configs: dict[str, ConfigEntry] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceConfigs:
    resource_type: ConfigResourceType | int
    name: str
    entries: dict[str, ConfigEntry]
    error: kerrors.KafkaError | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str                       # "consumer" for consumer groups, "" for offsets-only groups
    state: str | None = None                 # from ListGroups v4 (brokers 2.6+)
    type: str | None = None                  # from ListGroups v5 (brokers 3.8+): classic, consumer, share


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes                          # the member's subscription, in the group protocol's encoding
    assignment: bytes                        # its assignment, in the same encoding


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: kerrors.KafkaError | None
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""                       # the chosen assignor, for consumer groups
    members: tuple[MemberDescription, ...] = ()
    authorized_operations: int | None = None


@dataclass(frozen=True)
class DeleteRecordsResult:
    low_watermark: int                       # the partition's new log start offset; -1 on error
    error: kerrors.KafkaError | None = None
