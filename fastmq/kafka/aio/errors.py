"""aiokafka.errors' names, so that `except aiokafka.errors.X` keeps catching what fastmq raises.

Every name fastmq.kafka.errors has is the same class here (KafkaError, KafkaTimeoutError, IllegalStateError,
CommitFailedError, NotLeaderForPartitionError, ...). aiokafka's other names for broker error codes are
fastmq's class of that code (for_code), so they catch exactly what a broker's answer raises; the few
client-side conditions only aiokafka names get their own classes.
"""
from __future__ import annotations

from fastmq.kafka.errors import *  # noqa: F403  (the shared names are the same classes)
from fastmq.kafka.errors import (
    IllegalStateError, KafkaConnectionError, KafkaError, MessageSizeTooLargeError, ProducerFencedError, for_code,
)


class ConsumerStoppedError(KafkaError):
    """The consumer was stopped while (or before) it was asked for records; `async for` ends on it."""


class ProducerClosed(KafkaError):
    """send() on a producer that was stopped."""


class IllegalOperation(IllegalStateError):
    """The operation does not fit how the consumer is set up (e.g. commit() without a group_id)."""


class AuthenticationFailedError(KafkaError):
    """The broker refused this client's credentials."""


class AuthenticationMethodNotSupported(AuthenticationFailedError):
    """The broker does not offer the SASL mechanism asked for."""


class KafkaUnavailableError(KafkaConnectionError):
    """No broker could be reached."""


# Client-side names aiokafka gives to conditions fastmq raises under its own (kafka-python's) name.
ProducerFenced = ProducerFencedError
RecordTooLargeError = MessageSizeTooLargeError

# aiokafka's names of broker error codes whose fastmq class is named differently.
InvalidMessageError = for_code(2)
StaleLeaderEpochCodeError = for_code(13)
GroupLoadInProgressError = for_code(14)
GroupCoordinatorNotAvailableError = for_code(15)
NotCoordinatorForGroupError = for_code(16)
OutOfOrderSequenceNumber = for_code(45)
DuplicateSequenceNumber = for_code(46)
InvalidProducerEpoch = for_code(47)
InvalidTxnState = for_code(48)
InvalidProducerIdMapping = for_code(49)
InvalidTransactionTimeout = for_code(50)
ConcurrentTransactions = for_code(51)
TransactionCoordinatorFenced = for_code(52)
TransactionalIdAuthorizationFailed = for_code(53)
SecurityDisabled = for_code(54)
OperationNotAttempted = for_code(55)
LogDirNotFound = for_code(57)
SaslAuthenticationFailed = for_code(58)
UnknownProducerId = for_code(59)
ReassignmentInProgress = for_code(60)
DelegationTokenAuthDisabled = for_code(61)
DelegationTokenNotFound = for_code(62)
DelegationTokenOwnerMismatch = for_code(63)
DelegationTokenRequestNotAllowed = for_code(64)
DelegationTokenAuthorizationFailed = for_code(65)
DelegationTokenExpired = for_code(66)
InvalidPrincipalType = for_code(67)
NonEmptyGroup = for_code(68)
GroupIdNotFound = for_code(69)
FetchSessionIdNotFound = for_code(70)
InvalidFetchSessionEpoch = for_code(71)
ListenerNotFound = for_code(72)
MemberIdRequired = for_code(79)
