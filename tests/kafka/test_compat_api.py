"""The public methods of kafka-python 3.x's KafkaProducer, KafkaConsumer and KafkaAdminClient (the installed
oracle) exist on fastmq's compat classes with compatible signatures: each of kafka-python's parameters with
the same name, kind, position and default; parameters fastmq adds come after them and have defaults."""
from __future__ import annotations

import inspect

import kafka
import pytest

from fastmq.kafka import compat

CLASSES = ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient")
SPECIAL = ("__init__", "__iter__", "__next__", "__enter__", "__exit__")


def public_methods(cls: type) -> list[str]:
    return sorted(name for name in dir(cls) if (not name.startswith("_") or name in SPECIAL)
                  and callable(getattr(cls, name)) and name in _defined(cls))


def _defined(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ if klass is not object for name in vars(klass)}


CASES = [(cls, method) for cls in CLASSES for method in public_methods(getattr(kafka, cls))]


def test_the_enumeration_finds_kafka_pythons_api():
    found = {cls: [m for c, m in CASES if c == cls] for cls in CLASSES}
    assert {"send", "flush", "close", "partitions_for"} <= set(found["KafkaProducer"])
    assert {"poll", "subscribe", "seek_to_end", "__next__"} <= set(found["KafkaConsumer"])
    assert {"create_topics", "describe_groups", "delete_records"} <= set(found["KafkaAdminClient"])


def compatible(theirs: inspect.Signature, ours: inspect.Signature) -> list[str]:
    """What a call written for `theirs` could not do with `ours`."""
    problems = []
    their_params = list(theirs.parameters.values())
    our_params = list(ours.parameters.values())
    our_by_name = {p.name: p for p in our_params}
    our_kinds = {p.kind for p in our_params}
    for index, param in enumerate(their_params):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            if param.kind not in our_kinds:
                problems.append(f"no {param}")
            continue
        mine = our_by_name.get(param.name)
        if mine is None:
            problems.append(f"no parameter {param.name}")
            continue
        if mine.kind != param.kind:
            problems.append(f"{param.name} is {mine.kind.description}, not {param.kind.description}")
        if param.kind is not param.KEYWORD_ONLY and our_params.index(mine) != index:
            problems.append(f"{param.name} at position {our_params.index(mine)}, not {index}")
        if mine.default != param.default:
            problems.append(f"{param.name} defaults to {mine.default!r}, not {param.default!r}")
    their_names = {p.name for p in their_params}
    for param in our_params:
        if param.name not in their_names and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD) \
                and param.default is param.empty:
            problems.append(f"extra parameter {param.name} without a default")
    return problems


@pytest.mark.parametrize("cls, method", CASES)
def test_method_exists_with_a_compatible_signature(cls, method):
    theirs, ours = getattr(kafka, cls), getattr(compat, cls)
    assert hasattr(ours, method), f"{cls}.{method} is missing"
    assert isinstance(inspect.getattr_static(ours, method), classmethod) == isinstance(
        inspect.getattr_static(theirs, method), classmethod)
    their_signature, our_signature = inspect.signature(getattr(theirs, method)), inspect.signature(getattr(ours, method))
    if method in SPECIAL and method != "__init__":
        # Python calls these positionally: the names of their parameters do not matter.
        our_signature.bind(*range(len(their_signature.parameters)))
    else:
        assert compatible(their_signature, our_signature) == []


def test_compatible_names_each_difference():
    def theirs(self, a, b=1, *, c=None): ...

    def same(self, a, b=1, *, c=None, extra=2): ...

    def moved(self, b=1, a=None, *, c=None): ...

    def changed(self, a, b=2, c=None, *, needed): ...

    signature = inspect.signature
    assert compatible(signature(theirs), signature(same)) == []
    assert compatible(signature(theirs), signature(moved)) == [
        "a at position 2, not 1", "a defaults to None, not <class 'inspect._empty'>", "b at position 1, not 2"]
    assert compatible(signature(theirs), signature(changed)) == [
        "b defaults to 2, not 1", "c is positional or keyword, not keyword-only",
        "extra parameter needed without a default"]
