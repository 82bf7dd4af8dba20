"""Kafka's exceptions, under kafka-python 3.x's names.

Two families live here:
- client-side conditions (timeouts, bad settings, illegal states, connection trouble), and
- BrokerResponseError: one class per error code a broker can put in a response, with the code in `errno`,
  Kafka's symbolic name in `message` and a sentence in `description`. for_code(errno) maps a code from the
  wire to its class; codes this module does not know still get a class (named after the code), so a newer
  broker never turns an error response into a KeyError.

`retriable` says whether repeating the same request may succeed; `invalid_metadata` says whether the client
should refresh its cluster metadata first (the leader moved, the topic is not known yet, ...). Both follow
kafka-python so that code written against it keeps its retry behaviour.

The compiled record layer imports this module, so it imports nothing from fastmq except fastmq.errors.
"""
from __future__ import annotations

import threading
from typing import Any

from fastmq import errors as _base


class KafkaError(_base.FastMQError):
    """Base class of every Kafka exception."""

    retriable = False
    invalid_metadata = False

    def __str__(self) -> str:
        if not self.args:
            return type(self).__name__
        return f"{type(self).__name__}: {super().__str__()}"

    # kafka-python compares errors by class and arguments (its tests and some user code rely on it).
    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.args == other.args

    def __hash__(self) -> int:
        return hash((type(self), repr(self.args)))


class RetriableError(KafkaError):
    """Repeating the operation (after a backoff) may succeed."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """The client's view of the cluster is stale: refresh metadata, then retry."""

    invalid_metadata = True


class Cancelled(RetriableError):
    """The request was abandoned (its connection closed) before an answer arrived."""


class CommitFailedError(KafkaError):
    """An offset commit was refused because the group rebalanced away this member's partitions."""

    def __init__(self, *args: Any) -> None:
        if not args:
            args = ("Commit cannot be completed since the group has already rebalanced and assigned the "
                    "partitions to another member. Poll more often (or lower max_poll_records) so that "
                    "processing fits in max_poll_interval_ms, then rejoin.",)
        super().__init__(*args)


class IllegalArgumentError(KafkaError):
    """An argument is not acceptable for the operation."""


class IllegalStateError(KafkaError, _base.IllegalStateError):
    """The operation is not allowed in the object's current state (e.g. after close())."""


class KafkaConfigurationError(KafkaError, _base.ConfigurationError):
    """A configuration key is unknown, or its value is out of range or inconsistent with another one."""


class KafkaConnectionError(InvalidMetadataError):
    """A connection to a broker failed or was closed."""


class NoBrokersAvailable(KafkaError):
    """None of the bootstrap servers could be reached (kafka-python 2.x name, kept for old code)."""


class KafkaProtocolError(KafkaError, _base.ProtocolError):
    """The broker sent bytes that do not follow the Kafka protocol; the connection is closed."""


class CorrelationIdError(RetriableError, KafkaProtocolError):
    """A response carried a correlation id that matches no request in flight."""


class InvalidReceiveError(KafkaProtocolError):
    """A response frame could not be read (bad size prefix or truncated body)."""


class EncodeError(KafkaError, ValueError, TypeError):
    """A message field holds a value its wire type cannot carry (wrong type, out of range, null where the
    version does not allow it). `path` names the field, e.g. topic_data[0].partition_data[2].index.

    Raised before anything is sent: fix the value (or choose an API version that has the field)."""

    def __init__(self, reason: str, path: list[Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        # Segments are appended innermost first while the error travels up the struct tree.
        self.path_segments: list[Any] = path if path is not None else []

    @property
    def path(self) -> str:
        text = ""
        for segment in reversed(self.path_segments):
            text += f"[{segment}]" if isinstance(segment, int) else (f".{segment}" if text else segment)
        return text

    def __str__(self) -> str:
        path = self.path
        return f"{type(self).__name__}: {path}: {self.reason}" if path else f"{type(self).__name__}: {self.reason}"


class UnsupportedRequestError(KafkaProtocolError):
    """A request frame names an API or version this side does not implement.

    api_key, api_version and correlation_id are read from the header so that a broker can answer (Kafka
    answers an unknown ApiVersions version with a v0 UNSUPPORTED_VERSION response and closes the connection
    for anything else)."""

    def __init__(self, reason: str, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(reason)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.args[0], self.api_key, self.api_version, self.correlation_id)


class KafkaTimeoutError(RetriableError, _base.OperationTimeoutError):
    """An operation did not complete within its time limit."""


class MetadataEmptyBrokerList(RetriableError):
    """A metadata response listed no brokers."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and no reset policy (auto_offset_reset='none') for a partition."""


class LogTruncationError(KafkaError):
    """The leader's log was truncated below the consumer's position (unclean leader election, KIP-320).

    divergent_offsets maps each affected TopicPartition to the OffsetAndMetadata to seek back to, or to
    None when the broker knows no safe point.
    """

    def __init__(self, divergent_offsets: dict[Any, Any], *args: Any) -> None:
        self.divergent_offsets = divergent_offsets
        super().__init__(*(args or (f"Detected truncated partitions: {divergent_offsets}",)))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.divergent_offsets, *self.args)


class NodeNotReadyError(RetriableError):
    """The connection to the node is not established (yet)."""


class UnknownBrokerIdError(KafkaError):
    """A node id that the current metadata does not contain."""


class QuotaViolationError(KafkaError):
    """A client quota was exceeded."""


class StaleMetadata(InvalidMetadataError):
    """The cached metadata is older than the operation needs."""


class TooManyInFlightRequests(RetriableError):
    """max_in_flight_requests_per_connection requests already await their answers on this connection."""


class UnrecognizedBrokerVersion(KafkaError):
    """The broker's ApiVersions answer matches no known broker release."""


class UnsupportedCodecError(KafkaError, _base.UnsupportedCodecError):
    """A compression codec is unknown, or its library is not installed."""


class TransactionAbortedError(KafkaError):
    """Raised on batches left unsent when the user aborted the transaction (KIP-654).

    Not fatal: the producer can begin the next transaction.
    """

    message = "Failing batch since transaction was aborted"


class BrokerResponseError(KafkaError):
    """An error code a broker returned; subclasses exist for every known code."""

    errno: int | None = None
    message: str | None = None
    description: str | None = None

    def __str__(self) -> str:
        text = super().__str__()
        if not self.args and self.description:
            text = f"{text}: {self.description}"
        return f"[Error {self.errno}] {text}"


class AuthorizationError(BrokerResponseError):
    """The principal is not allowed to perform the operation (the *_AUTHORIZATION_FAILED codes)."""


# ----------------------------------------------------------------------------------------------------------
# One class per broker error code (Apache Kafka's Errors table; names follow kafka-python).
# ----------------------------------------------------------------------------------------------------------

class NoError(BrokerResponseError):
    errno, message = 0, "NO_ERROR"
    description = "No error: the operation succeeded."


class UnknownError(BrokerResponseError):
    errno, message = -1, "UNKNOWN"
    description = "The broker hit an unexpected error while handling the request; see its log."


class OffsetOutOfRangeError(BrokerResponseError):
    errno, message = 1, "OFFSET_OUT_OF_RANGE"
    description = "The requested offset is outside the range the broker keeps for this partition."


class CorruptRecordError(BrokerResponseError, _base.CorruptDataError):
    errno, message = 2, "CORRUPT_MESSAGE"
    description = "A record failed its CRC check, exceeds the valid size, or is otherwise corrupt."


CorruptRecordException = CorruptRecordError  # the kafka-python 1.x name


class UnknownTopicOrPartitionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 3, "UNKNOWN_TOPIC_OR_PARTITION"
    description = "This broker hosts no such topic or partition (it may not be created yet)."


class InvalidFetchRequestError(BrokerResponseError):
    errno, message = 4, "INVALID_FETCH_SIZE"
    description = "The requested fetch size is invalid."


class LeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 5, "LEADER_NOT_AVAILABLE"
    description = "The partition has no leader right now (an election is in progress); retry shortly."


class NotLeaderForPartitionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 6, "NOT_LEADER_FOR_PARTITION"
    description = "This broker is not the leader (or a follower) of the partition: the client's metadata is stale."


NotLeaderOrFollowerError = NotLeaderForPartitionError  # Apache Kafka's current name for code 6


class RequestTimedOutError(RetriableError, BrokerResponseError):
    errno, message = 7, "REQUEST_TIMED_OUT"
    description = "The request took longer than the timeout it carried."


class BrokerNotAvailableError(BrokerResponseError):
    errno, message = 8, "BROKER_NOT_AVAILABLE"
    description = "The broker is not available."


class ReplicaNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 9, "REPLICA_NOT_AVAILABLE"
    description = "A replica expected on the broker is not there (usually safe to ignore)."


class MessageSizeTooLargeError(BrokerResponseError):
    errno, message = 10, "MESSAGE_SIZE_TOO_LARGE"
    description = "The request included a message larger than the broker accepts (max.message.bytes)."


class StaleControllerEpochError(BrokerResponseError):
    errno, message = 11, "STALE_CONTROLLER_EPOCH"
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(BrokerResponseError):
    errno, message = 12, "OFFSET_METADATA_TOO_LARGE"
    description = "The metadata string of an offset commit is longer than the broker allows."


class NetworkExceptionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 13, "NETWORK_EXCEPTION"
    description = "The broker's connection to another broker was lost while handling the request."


class CoordinatorLoadInProgressError(RetriableError, BrokerResponseError):
    errno, message = 14, "COORDINATOR_LOAD_IN_PROGRESS"
    description = "The coordinator is still loading its state (group or transaction log); retry shortly."


class CoordinatorNotAvailableError(RetriableError, BrokerResponseError):
    errno, message = 15, "COORDINATOR_NOT_AVAILABLE"
    description = "The group or transaction coordinator is not available; find the coordinator again."


class NotCoordinatorError(RetriableError, BrokerResponseError):
    errno, message = 16, "NOT_COORDINATOR"
    description = "This broker is not the coordinator of the group or transactional id; find it again."


class InvalidTopicError(BrokerResponseError):
    errno, message = 17, "INVALID_TOPIC"
    description = "The topic name is invalid, or the topic is internal and cannot be written to."


class RecordListTooLargeError(BrokerResponseError):
    errno, message = 18, "RECORD_LIST_TOO_LARGE"
    description = "A batch of the produce request is larger than the broker's segment size."


class NotEnoughReplicasError(RetriableError, BrokerResponseError):
    errno, message = 19, "NOT_ENOUGH_REPLICAS"
    description = "Fewer in-sync replicas than min.insync.replicas: the acks=all write was refused."


class NotEnoughReplicasAfterAppendError(RetriableError, BrokerResponseError):
    errno, message = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    description = "The records were written, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(BrokerResponseError):
    errno, message = 21, "INVALID_REQUIRED_ACKS"
    description = "The produce request's acks is not -1, 0 or 1."


class IllegalGenerationError(BrokerResponseError):
    errno, message = 22, "ILLEGAL_GENERATION"
    description = "The group generation in the request is not the current one: rejoin the group."


class InconsistentGroupProtocolError(BrokerResponseError):
    errno, message = 23, "INCONSISTENT_GROUP_PROTOCOL"
    description = "The member's protocol type or protocols do not match those of the group."


class InvalidGroupIdError(BrokerResponseError):
    errno, message = 24, "INVALID_GROUP_ID"
    description = "The group id is empty or null."


class UnknownMemberIdError(BrokerResponseError):
    errno, message = 25, "UNKNOWN_MEMBER_ID"
    description = "The coordinator does not know this member id: rejoin the group with an empty member id."


class InvalidSessionTimeoutError(BrokerResponseError):
    errno, message = 26, "INVALID_SESSION_TIMEOUT"
    description = "The session timeout is outside the broker's group.min/max.session.timeout.ms range."


class RebalanceInProgressError(BrokerResponseError):
    errno, message = 27, "REBALANCE_IN_PROGRESS"
    description = "The group is rebalancing: rejoin it."


class InvalidCommitOffsetSizeError(BrokerResponseError):
    errno, message = 28, "INVALID_COMMIT_OFFSET_SIZE"
    description = "The offset commit was refused because its metadata is too large."


class TopicAuthorizationFailedError(AuthorizationError):
    errno, message = 29, "TOPIC_AUTHORIZATION_FAILED"
    description = "The principal may not access the topic."


class GroupAuthorizationFailedError(AuthorizationError):
    errno, message = 30, "GROUP_AUTHORIZATION_FAILED"
    description = "The principal may not access the group."


class ClusterAuthorizationFailedError(AuthorizationError):
    errno, message = 31, "CLUSTER_AUTHORIZATION_FAILED"
    description = "The principal may not use this cluster-level (administrative) API."


class InvalidTimestampError(BrokerResponseError):
    errno, message = 32, "INVALID_TIMESTAMP"
    description = "A record timestamp is outside the range the broker accepts."


class UnsupportedSaslMechanismError(BrokerResponseError):
    errno, message = 33, "UNSUPPORTED_SASL_MECHANISM"
    description = "The broker does not offer the requested SASL mechanism."


class IllegalSaslStateError(BrokerResponseError):
    errno, message = 34, "ILLEGAL_SASL_STATE"
    description = "The request is not valid in the current state of the SASL exchange."


class UnsupportedVersionError(BrokerResponseError):
    errno, message = 35, "UNSUPPORTED_VERSION"
    description = "The broker does not support this version of the API."


class IncompatibleBrokerVersion(UnsupportedVersionError):
    """Raised by the client itself: the broker supports no version of an API that the client can use."""


class TopicAlreadyExistsError(BrokerResponseError):
    errno, message = 36, "TOPIC_ALREADY_EXISTS"
    description = "A topic with this name already exists."


class InvalidPartitionsError(BrokerResponseError):
    errno, message = 37, "INVALID_PARTITIONS"
    description = "The number of partitions is invalid."


class InvalidReplicationFactorError(BrokerResponseError):
    errno, message = 38, "INVALID_REPLICATION_FACTOR"
    description = "The replication factor is invalid (e.g. larger than the number of brokers)."


class InvalidReplicationAssignmentError(BrokerResponseError):
    errno, message = 39, "INVALID_REPLICATION_ASSIGNMENT"
    description = "The replica assignment is invalid."


class InvalidConfigurationError(BrokerResponseError):
    errno, message = 40, "INVALID_CONFIG"
    description = "A configuration value is invalid."


class NotControllerError(RetriableError, BrokerResponseError):
    errno, message = 41, "NOT_CONTROLLER"
    description = "This broker is not the controller: refresh metadata and send the request to the controller."


class InvalidRequestError(BrokerResponseError):
    errno, message = 42, "INVALID_REQUEST"
    description = ("The request is malformed or not valid for this broker (often a client bug or a version "
                   "mismatch); the broker's log says more.")


class UnsupportedForMessageFormatError(BrokerResponseError):
    errno, message = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    description = "The broker's message format version does not support this request."


class PolicyViolationError(BrokerResponseError):
    errno, message = 44, "POLICY_VIOLATION"
    description = "The request parameters violate a policy configured on the broker."


class OutOfOrderSequenceNumberError(BrokerResponseError):
    errno, message = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"
    description = "The broker received a sequence number out of order for this producer id."


class DuplicateSequenceNumberError(BrokerResponseError):
    errno, message = 46, "DUPLICATE_SEQUENCE_NUMBER"
    description = "The broker already has a batch with this sequence number."


class InvalidProducerEpochError(BrokerResponseError):
    errno, message = 47, "INVALID_PRODUCER_EPOCH"
    description = "The producer epoch is older than the broker's: another producer instance fenced this one."


class InvalidTxnStateError(BrokerResponseError):
    errno, message = 48, "INVALID_TXN_STATE"
    description = "The transactional operation is not valid in the transaction's current state."


class InvalidProducerIdMappingError(BrokerResponseError):
    errno, message = 49, "INVALID_PRODUCER_ID_MAPPING"
    description = "The producer id is not the one currently assigned to this transactional id."


class InvalidTransactionTimeoutError(BrokerResponseError):
    errno, message = 50, "INVALID_TRANSACTION_TIMEOUT"
    description = "The transaction timeout exceeds the broker's transaction.max.timeout.ms."


class ConcurrentTransactionsError(RetriableError, BrokerResponseError):
    errno, message = 51, "CONCURRENT_TRANSACTIONS"
    description = "Another operation on the same transaction is in progress; retry shortly."


class TransactionCoordinatorFencedError(BrokerResponseError):
    errno, message = 52, "TRANSACTION_COORDINATOR_FENCED"
    description = "The transaction coordinator that sent this is no longer the current one."


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    errno, message = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    description = "The principal may not use this transactional id."


class SecurityDisabledError(BrokerResponseError):
    errno, message = 54, "SECURITY_DISABLED"
    description = "Security features are disabled on the broker."


class OperationNotAttemptedError(BrokerResponseError):
    errno, message = 55, "OPERATION_NOT_ATTEMPTED"
    description = "The broker skipped this operation because another one in the same request failed."


class KafkaStorageError(InvalidMetadataError, BrokerResponseError):
    errno, message = 56, "KAFKA_STORAGE_ERROR"
    description = "The broker failed to access the partition's log on disk."


class LogDirNotFoundError(BrokerResponseError):
    errno, message = 57, "LOG_DIR_NOT_FOUND"
    description = "The log directory is not in the broker's configuration."


class SaslAuthenticationFailedError(BrokerResponseError):
    errno, message = 58, "SASL_AUTHENTICATION_FAILED"
    description = "SASL authentication failed: check the mechanism, user name and password."


class UnknownProducerIdError(BrokerResponseError):
    errno, message = 59, "UNKNOWN_PRODUCER_ID"
    description = ("The broker no longer knows this producer id (its records were removed by retention); "
                   "the producer has to reset its sequence state.")


class ReassignmentInProgressError(BrokerResponseError):
    errno, message = 60, "REASSIGNMENT_IN_PROGRESS"
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(BrokerResponseError):
    errno, message = 61, "DELEGATION_TOKEN_AUTH_DISABLED"
    description = "Delegation token authentication is not enabled."


class DelegationTokenNotFoundError(BrokerResponseError):
    errno, message = 62, "DELEGATION_TOKEN_NOT_FOUND"
    description = "The broker has no such delegation token."


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    errno, message = 63, "DELEGATION_TOKEN_OWNER_MISMATCH"
    description = "The principal is not the owner or a renewer of the delegation token."


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    errno, message = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    description = ("Delegation token requests are not allowed on PLAINTEXT or one-way TLS connections, nor "
                   "on connections authenticated with a delegation token.")


class DelegationTokenAuthorizationFailedError(AuthorizationError):
    errno, message = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    description = "The principal may not use delegation tokens."


class DelegationTokenExpiredError(BrokerResponseError):
    errno, message = 66, "DELEGATION_TOKEN_EXPIRED"
    description = "The delegation token has expired."


class InvalidPrincipalTypeError(BrokerResponseError):
    errno, message = 67, "INVALID_PRINCIPAL_TYPE"
    description = "The principal type is not supported."


class NonEmptyGroupError(BrokerResponseError):
    errno, message = 68, "NON_EMPTY_GROUP"
    description = "The group still has members."


class GroupIdNotFoundError(BrokerResponseError):
    errno, message = 69, "GROUP_ID_NOT_FOUND"
    description = "The group does not exist."


class FetchSessionIdNotFoundError(RetriableError, BrokerResponseError):
    errno, message = 70, "FETCH_SESSION_ID_NOT_FOUND"
    description = "The broker has no fetch session with this id: start a new session."


class InvalidFetchSessionEpochError(RetriableError, BrokerResponseError):
    errno, message = 71, "INVALID_FETCH_SESSION_EPOCH"
    description = "The fetch session epoch is not the one the broker expects: start a new session."


class ListenerNotFoundError(InvalidMetadataError, BrokerResponseError):
    errno, message = 72, "LISTENER_NOT_FOUND"
    description = "The partition's leader has no listener with the name of the one that served this request."


class TopicDeletionDisabledError(BrokerResponseError):
    errno, message = 73, "TOPIC_DELETION_DISABLED"
    description = "Topic deletion is disabled on the broker (delete.topic.enable=false)."


class FencedLeaderEpochError(InvalidMetadataError, BrokerResponseError):
    errno, message = 74, "FENCED_LEADER_EPOCH"
    description = "The leader epoch in the request is older than the broker's."


class UnknownLeaderEpochError(InvalidMetadataError, BrokerResponseError):
    errno, message = 75, "UNKNOWN_LEADER_EPOCH"
    description = "The leader epoch in the request is newer than the broker's."


class UnsupportedCompressionTypeError(BrokerResponseError):
    errno, message = 76, "UNSUPPORTED_COMPRESSION_TYPE"
    description = "The client does not support the partition's compression type (fetch version too old)."


class StaleBrokerEpochError(BrokerResponseError):
    errno, message = 77, "STALE_BROKER_EPOCH"
    description = "The broker epoch has changed."


class OffsetNotAvailableError(RetriableError, BrokerResponseError):
    errno, message = 78, "OFFSET_NOT_AVAILABLE"
    description = "The new leader's high watermark has not caught up yet; retry shortly."


class MemberIdRequiredError(BrokerResponseError):
    errno, message = 79, "MEMBER_ID_REQUIRED"
    description = "The member must join again with the member id the coordinator just assigned to it."


class PreferredLeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 80, "PREFERRED_LEADER_NOT_AVAILABLE"
    description = "The preferred leader is not available."


class GroupMaxSizeReachedError(BrokerResponseError):
    errno, message = 81, "GROUP_MAX_SIZE_REACHED"
    description = "The group already has the maximum number of members."


class FencedInstanceIdError(BrokerResponseError):
    errno, message = 82, "FENCED_INSTANCE_ID"
    description = "Another member with the same group.instance.id joined with a different member id."


class EligibleLeadersNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    description = "No eligible leader is available for the partition."


class ElectionNotNeededError(InvalidMetadataError, BrokerResponseError):
    errno, message = 84, "ELECTION_NOT_NEEDED"
    description = "The partition already has the leader the election would choose."


class NoReassignmentInProgressError(BrokerResponseError):
    errno, message = 85, "NO_REASSIGNMENT_IN_PROGRESS"
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(BrokerResponseError):
    errno, message = 86, "GROUP_SUBSCRIBED_TO_TOPIC"
    description = "Offsets of a topic cannot be deleted while the group is subscribed to it."


class InvalidRecordError(BrokerResponseError):
    errno, message = 87, "INVALID_RECORD"
    description = "A record failed the broker's validation and was rejected."


class UnstableOffsetCommitError(RetriableError, BrokerResponseError):
    errno, message = 88, "UNSTABLE_OFFSET_COMMIT"
    description = "Pending transactional offset commits must complete first; retry shortly."


class ThrottlingQuotaExceededError(RetriableError, BrokerResponseError):
    errno, message = 89, "THROTTLING_QUOTA_EXCEEDED"
    description = "The throttling quota was exceeded; retry after the throttle time."


class ProducerFencedError(BrokerResponseError):
    errno, message = 90, "PRODUCER_FENCED"
    description = "A newer producer with the same transactional id fenced this one."


class ResourceNotFoundError(BrokerResponseError):
    errno, message = 91, "RESOURCE_NOT_FOUND"
    description = "The request refers to a resource that does not exist."


class DuplicateResourceError(BrokerResponseError):
    errno, message = 92, "DUPLICATE_RESOURCE"
    description = "The request names the same resource twice."


class UnacceptableCredentialError(BrokerResponseError):
    errno, message = 93, "UNACCEPTABLE_CREDENTIAL"
    description = "The credential does not meet the broker's requirements."


class InconsistentVoterSetError(BrokerResponseError):
    errno, message = 94, "INCONSISTENT_VOTER_SET"
    description = "The sender or the receiver of a voter-only request is not one of the expected voters."


class InvalidUpdateVersionError(BrokerResponseError):
    errno, message = 95, "INVALID_UPDATE_VERSION"
    description = "The update version is invalid."


class FeatureUpdateFailedError(BrokerResponseError):
    errno, message = 96, "FEATURE_UPDATE_FAILED"
    description = "The finalized features could not be updated because of an unexpected broker error."


class PrincipalDeserializationFailureError(BrokerResponseError):
    errno, message = 97, "PRINCIPAL_DESERIALIZATION_FAILURE"
    description = "A forwarded request's principal could not be deserialized (broker security setup)."


class SnapshotNotFoundError(BrokerResponseError):
    errno, message = 98, "SNAPSHOT_NOT_FOUND"
    description = "The requested snapshot does not exist."


class PositionOutOfRangeError(BrokerResponseError):
    errno, message = 99, "POSITION_OUT_OF_RANGE"
    description = "The position is negative or beyond the end of the snapshot."


class UnknownTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno, message = 100, "UNKNOWN_TOPIC_ID"
    description = "This broker hosts no topic with this id."


class DuplicateBrokerRegistrationError(BrokerResponseError):
    errno, message = 101, "DUPLICATE_BROKER_REGISTRATION"
    description = "This broker id is already in use."


class BrokerIdNotRegisteredError(BrokerResponseError):
    errno, message = 102, "BROKER_ID_NOT_REGISTERED"
    description = "The broker id is not registered."


class InconsistentTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno, message = 103, "INCONSISTENT_TOPIC_ID"
    description = "The topic id in the request does not match the topic id of the log."


class InconsistentClusterIdError(BrokerResponseError):
    errno, message = 104, "INCONSISTENT_CLUSTER_ID"
    description = "The cluster id in the request does not match the broker's."


class TransactionalIdNotFoundError(BrokerResponseError):
    errno, message = 105, "TRANSACTIONAL_ID_NOT_FOUND"
    description = "The transactional id does not exist."


class FetchSessionTopicIdError(RetriableError, BrokerResponseError):
    errno, message = 106, "FETCH_SESSION_TOPIC_ID_ERROR"
    description = "The fetch session mixed topic names and topic ids inconsistently."


class IneligibleReplicaError(BrokerResponseError):
    errno, message = 107, "INELIGIBLE_REPLICA"
    description = "The new in-sync replica set contains an ineligible replica."


class NewLeaderElectedError(BrokerResponseError):
    errno, message = 108, "NEW_LEADER_ELECTED"
    description = "The partition state was updated, but the leader changed meanwhile."


class OffsetMovedToTieredStorageError(BrokerResponseError):
    errno, message = 109, "OFFSET_MOVED_TO_TIERED_STORAGE"
    description = "The requested offset has moved to tiered storage."


class FencedMemberEpochError(BrokerResponseError):
    errno, message = 110, "FENCED_MEMBER_EPOCH"
    description = "The coordinator fenced the member's epoch: give up all partitions and rejoin."


class UnreleasedInstanceIdError(BrokerResponseError):
    errno, message = 111, "UNRELEASED_INSTANCE_ID"
    description = "Another member of the group still uses this instance id; it has to leave first."


class UnsupportedAssignorError(BrokerResponseError):
    errno, message = 112, "UNSUPPORTED_ASSIGNOR"
    description = "The group does not support this assignor or its version range."


class StaleMemberEpochError(BrokerResponseError):
    errno, message = 113, "STALE_MEMBER_EPOCH"
    description = "The member epoch is stale: retry after the next heartbeat delivers the current one."


class MismatchedEndpointTypeError(BrokerResponseError):
    errno, message = 114, "MISMATCHED_ENDPOINT_TYPE"
    description = "The request was sent to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(BrokerResponseError):
    errno, message = 115, "UNSUPPORTED_ENDPOINT_TYPE"
    description = "This endpoint type is not supported yet."


class UnknownControllerIdError(BrokerResponseError):
    errno, message = 116, "UNKNOWN_CONTROLLER_ID"
    description = "The controller id is not known."


class UnknownSubscriptionIdError(BrokerResponseError):
    errno, message = 117, "UNKNOWN_SUBSCRIPTION_ID"
    description = "The telemetry subscription id is invalid or outdated."


class TelemetryTooLargeError(BrokerResponseError):
    errno, message = 118, "TELEMETRY_TOO_LARGE"
    description = "The telemetry push is larger than the broker accepts."


class InvalidRegistrationError(BrokerResponseError):
    errno, message = 119, "INVALID_REGISTRATION"
    description = "The controller considers the broker registration invalid."


class TransactionAbortableError(BrokerResponseError):
    errno, message = 120, "TRANSACTION_ABORTABLE"
    description = "The transaction hit an error: abort it to keep using this transactional id."


class InvalidRecordStateError(BrokerResponseError):
    errno, message = 121, "INVALID_RECORD_STATE"
    description = "The record state is invalid; the delivery acknowledgement could not be completed."


class ShareSessionNotFoundError(RetriableError, BrokerResponseError):
    errno, message = 122, "SHARE_SESSION_NOT_FOUND"
    description = "The share session was not found."


class InvalidShareSessionEpochError(RetriableError, BrokerResponseError):
    errno, message = 123, "INVALID_SHARE_SESSION_EPOCH"
    description = "The share session epoch is invalid."


class FencedStateEpochError(BrokerResponseError):
    errno, message = 124, "FENCED_STATE_EPOCH"
    description = "The share-group state epoch did not match the coordinator's."


class InvalidVoterKeyError(BrokerResponseError):
    errno, message = 125, "INVALID_VOTER_KEY"
    description = "The voter key does not match the receiving replica's key."


class DuplicateVoterError(BrokerResponseError):
    errno, message = 126, "DUPLICATE_VOTER"
    description = "The voter is already part of the set of voters."


class VoterNotFoundError(BrokerResponseError):
    errno, message = 127, "VOTER_NOT_FOUND"
    description = "The voter is not part of the set of voters."


def _collect_broker_errors() -> dict[int, type[BrokerResponseError]]:
    table: dict[int, type[BrokerResponseError]] = {}
    for obj in list(globals().values()):
        errno = obj.__dict__.get("errno") if isinstance(obj, type) else None
        if errno is not None and issubclass(obj, BrokerResponseError):
            table[errno] = obj
    return table


kafka_errors: dict[int, type[BrokerResponseError]] = _collect_broker_errors()
"""Every known broker error code -> its class (kafka-python exports the same table)."""

# Classes made for codes this module does not know, so that repeated codes give the same class. Codes are
# int16 on the wire; the cache is bounded anyway because the codes come from the network.
_unrecognized: dict[int, type[UnknownError]] = {}
_unrecognized_lock = threading.Lock()
_UNRECOGNIZED_CACHE_LIMIT = 1024


def for_code(errno: int) -> type[BrokerResponseError]:
    """The exception class of a broker error code; unknown codes get a subclass of UnknownError named after
    the code (e.g. BrokerError999) whose errno is that code."""
    known = kafka_errors.get(errno)
    if known is not None:
        return known
    with _unrecognized_lock:
        cls = _unrecognized.get(errno)
        if cls is None:
            cls = type(f"BrokerError{errno}".replace("-", "Minus"), (UnknownError,), {
                "__module__": __name__,
                "__doc__": f"Error code {errno}, which this version of fastmq does not know.",
                "errno": errno,
                "message": f"UNKNOWN_ERROR_CODE_{errno}",
                "description": (f"The broker returned error code {errno}, which this version of fastmq does not "
                                "know (the broker may be newer); see the broker's documentation."),
            })
            if len(_unrecognized) < _UNRECOGNIZED_CACHE_LIMIT:
                _unrecognized[errno] = cls
    return cls
