"""fastmq.kafka.errors against kafka-python 3.0.12's kafka.errors (the contract of a drop-in replacement)."""
from __future__ import annotations

import ast
import inspect
import pickle
from pathlib import Path

import kafka.errors as kafka_python_errors
import pytest

from fastmq import errors as base
from fastmq.kafka import errors

KAFKA_PYTHON_CLASSES = [
    obj for obj in vars(kafka_python_errors).values()
    if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == "kafka.errors"
]


@pytest.mark.parametrize("theirs", KAFKA_PYTHON_CLASSES, ids=lambda cls: cls.__name__)
def test_every_kafka_python_exception_exists_with_the_same_contract(theirs):
    ours = getattr(errors, theirs.__name__)
    for attribute in ("errno", "message", "retriable", "invalid_metadata"):
        assert getattr(ours, attribute, None) == getattr(theirs, attribute, None), attribute
    # every kafka-python ancestor has a namesake among ours, so `except kafka_name:` keeps catching it
    their_ancestors = {cls.__name__ for cls in theirs.__mro__ if cls.__module__ == "kafka.errors"}
    our_ancestors = {cls.__name__ for cls in ours.__mro__}
    assert their_ancestors <= our_ancestors
    assert issubclass(ours, base.FastMQError)


def test_the_code_table_matches_kafka_python():
    theirs = {code: cls.__name__ for code, cls in kafka_python_errors.kafka_errors.items() if code is not None}
    ours = {code: cls.__name__ for code, cls in errors.kafka_errors.items()}
    assert ours == theirs
    assert set(ours) == set(range(-1, 128))


def test_for_code():
    assert errors.for_code(0) is errors.NoError
    assert errors.for_code(3) is errors.UnknownTopicOrPartitionError
    assert errors.for_code(-1) is errors.UnknownError
    unknown = errors.for_code(999)
    assert unknown is errors.for_code(999)
    assert issubclass(unknown, errors.UnknownError) and unknown.errno == 999
    assert "999" in unknown.__name__ and "999" in str(unknown())
    negative = errors.for_code(-42)
    assert negative.errno == -42 and "42" in negative.__name__
    # codes come from the network: many distinct unknown codes must not grow the cache without bound
    for code in range(2000, 2000 + 3 * errors._UNRECOGNIZED_CACHE_LIMIT):
        assert errors.for_code(code).errno == code
    assert len(errors._unrecognized) <= errors._UNRECOGNIZED_CACHE_LIMIT


def test_hierarchy_links_to_fastmq_errors():
    assert issubclass(errors.KafkaError, base.FastMQError)
    assert issubclass(errors.KafkaConfigurationError, base.ConfigurationError)
    assert issubclass(errors.KafkaConfigurationError, ValueError)
    assert issubclass(errors.CorruptRecordError, base.CorruptDataError)
    assert issubclass(errors.CorruptRecordError, errors.BrokerResponseError)
    assert errors.CorruptRecordException is errors.CorruptRecordError
    assert issubclass(errors.UnsupportedCodecError, base.UnsupportedCodecError)
    assert issubclass(errors.KafkaProtocolError, base.ProtocolError)
    assert issubclass(errors.EncodeError, ValueError) and issubclass(errors.EncodeError, TypeError)
    assert issubclass(errors.UnsupportedRequestError, base.ProtocolError)
    assert errors.NotLeaderOrFollowerError is errors.NotLeaderForPartitionError
    assert issubclass(errors.NoBrokersAvailable, errors.KafkaError)


def test_flags():
    assert errors.NotLeaderForPartitionError.retriable and errors.NotLeaderForPartitionError.invalid_metadata
    assert errors.RequestTimedOutError.retriable and not errors.RequestTimedOutError.invalid_metadata
    assert not errors.TopicAuthorizationFailedError.retriable
    assert errors.KafkaTimeoutError.retriable


def test_messages_read_well():
    assert str(errors.KafkaTimeoutError()) == "KafkaTimeoutError"
    assert str(errors.KafkaTimeoutError("waited 5 s")) == "KafkaTimeoutError: waited 5 s"
    assert str(errors.UnknownTopicOrPartitionError("t-1")) == "[Error 3] UnknownTopicOrPartitionError: t-1"
    described = str(errors.UnknownTopicOrPartitionError())
    assert described.startswith("[Error 3] UnknownTopicOrPartitionError: ") and "topic" in described
    assert "rebalanced" in str(errors.CommitFailedError())
    truncation = errors.LogTruncationError({"tp": None})
    assert truncation.divergent_offsets == {"tp": None} and "tp" in str(truncation)


def test_equality_and_pickling():
    assert errors.KafkaTimeoutError("x") == errors.KafkaTimeoutError("x")
    assert errors.KafkaTimeoutError("x") != errors.KafkaTimeoutError("y")
    assert errors.KafkaTimeoutError("x") != errors.NodeNotReadyError("x")
    assert len({errors.KafkaTimeoutError("x"), errors.KafkaTimeoutError("x")}) == 1
    restored = pickle.loads(pickle.dumps(errors.UnknownTopicOrPartitionError("t")))
    assert restored == errors.UnknownTopicOrPartitionError("t")
    truncation = pickle.loads(pickle.dumps(errors.LogTruncationError({"tp": 5})))
    assert truncation.divergent_offsets == {"tp": 5}
    unsupported = pickle.loads(pickle.dumps(errors.UnsupportedRequestError("no", 18, 9, 77)))
    assert (unsupported.api_key, unsupported.api_version, unsupported.correlation_id) == (18, 9, 77)
    path_error = pickle.loads(pickle.dumps(errors.EncodeError("bad", ["index"])))
    assert str(path_error) == "EncodeError: index: bad"


def test_encode_error_path():
    error = errors.EncodeError("does not fit in int32")
    error.path_segments.extend(["index", 2, "partition_data", 0, "topic_data"])
    assert error.path == "topic_data[0].partition_data[2].index"
    assert str(error) == "EncodeError: topic_data[0].partition_data[2].index: does not fit in int32"
    assert str(errors.EncodeError("bad")) == "EncodeError: bad"


def test_module_imports_only_fastmq_errors():
    """The compiled record layer imports this module; it must not pull in the rest of fastmq."""
    tree = ast.parse(Path(errors.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module if node.level == 0 else "." * node.level)
            if node.module == "fastmq":
                imported.update(f"fastmq.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    fastmq_modules = {name for name in imported if name.startswith("fastmq") and name != "fastmq"}
    assert fastmq_modules == {"fastmq.errors"}
