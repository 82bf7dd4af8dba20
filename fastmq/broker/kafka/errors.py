"""The Kafka error code for each refusal of the broker core (fastmq.broker.errors)."""
from __future__ import annotations

from fastmq.broker.errors import CoreError
from fastmq.kafka import errors as kerrors

NONE = 0

KAFKA_ERRORS: dict[CoreError, type[kerrors.BrokerResponseError]] = {
    CoreError.NOT_AVAILABLE: kerrors.CoordinatorNotAvailableError,
    CoreError.INVALID_GROUP_ID: kerrors.InvalidGroupIdError,
    CoreError.GROUP_NOT_FOUND: kerrors.GroupIdNotFoundError,
    CoreError.INVALID_SESSION_TIMEOUT: kerrors.InvalidSessionTimeoutError,
    CoreError.INCONSISTENT_GROUP_PROTOCOL: kerrors.InconsistentGroupProtocolError,
    CoreError.UNKNOWN_MEMBER: kerrors.UnknownMemberIdError,
    CoreError.MEMBER_ID_REQUIRED: kerrors.MemberIdRequiredError,
    CoreError.GROUP_FULL: kerrors.GroupMaxSizeReachedError,
    CoreError.FENCED_INSTANCE: kerrors.FencedInstanceIdError,
    CoreError.STALE_GENERATION: kerrors.IllegalGenerationError,
    CoreError.REBALANCE_IN_PROGRESS: kerrors.RebalanceInProgressError,
    CoreError.NON_EMPTY_GROUP: kerrors.NonEmptyGroupError,
    CoreError.UNKNOWN_PRODUCER: kerrors.UnknownProducerIdError,
    CoreError.STALE_PRODUCER_EPOCH: kerrors.InvalidProducerEpochError,
    CoreError.OUT_OF_ORDER_SEQUENCE: kerrors.OutOfOrderSequenceNumberError,
    CoreError.INVALID_TRANSACTIONAL_ID: kerrors.InvalidRequestError,
    CoreError.INVALID_TRANSACTION_TIMEOUT: kerrors.InvalidTransactionTimeoutError,
    CoreError.PRODUCER_ID_MISMATCH: kerrors.InvalidProducerIdMappingError,
    CoreError.PRODUCER_FENCED: kerrors.ProducerFencedError,
    CoreError.TRANSACTION_BUSY: kerrors.ConcurrentTransactionsError,
    CoreError.INVALID_TRANSACTION_STATE: kerrors.InvalidTxnStateError,
    CoreError.UNKNOWN_PARTITION: kerrors.UnknownTopicOrPartitionError,
    CoreError.NOT_ATTEMPTED: kerrors.OperationNotAttemptedError,
    CoreError.INVALID_TOPIC_NAME: kerrors.InvalidTopicError,
    CoreError.TOPIC_EXISTS: kerrors.TopicAlreadyExistsError,
    CoreError.INVALID_PARTITIONS: kerrors.InvalidPartitionsError,
    CoreError.INVALID_CONFIG: kerrors.InvalidConfigurationError,
}


def kafka_code(error: CoreError | None) -> int:
    """The error code a Kafka response carries for the core's answer (None: success)."""
    if error is None:
        return NONE
    code = KAFKA_ERRORS[error].errno
    assert code is not None             # each class above is one error code's
    return code
