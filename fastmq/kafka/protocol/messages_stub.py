"""Writes messages.pyi, the type stub of the message classes that structs.py generates at import.

A type checker cannot see classes made by type() at run time, so the stub spells out what the schemas say:
one class per message with its fields typed (the union of all versions: a field nullable in any version is
`T | None`), a keyword-only constructor with the same types, its nested struct classes inside it, and the
module's other public names with their signatures as written in messages.py. The stub is checked in;
tests/kafka/test_messages_stub.py fails when it differs from what this module writes, so a schema change must
regenerate it:

    python -m fastmq.kafka.protocol.messages_stub
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from fastmq.kafka.protocol import messages
from fastmq.kafka.protocol.schema import FieldSchema, StructSchema

STUB_PATH = Path(__file__).with_name("messages.pyi")
_LINE_LENGTH = 120                  # ruff's, which also lints the stub

# What a decoder returns for each wire type (an encoder takes the same; bytes and records take any buffer, and a
# decoder gives records as a memoryview of the frame).
_PYTHON_TYPES = {"bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int", "uint32": "int",
                 "int64": "int", "float64": "float", "uuid": "uuid.UUID", "string": "str", "bytes": "bytes",
                 "records": "bytes | bytearray | memoryview"}

_HEADER = '''"""Type stub of fastmq.kafka.protocol.messages, written by fastmq.kafka.protocol.messages_stub from the
schemas: do not edit, regenerate (python -m fastmq.kafka.protocol.messages_stub)."""
import uuid
from enum import IntEnum
from typing import ClassVar

from fastmq.kafka._native.kafka_protocol import Struct, StructCodec
from fastmq.kafka.protocol.schema import ApiSchema
'''


def _field_type(fs: FieldSchema, class_names: dict[int, str]) -> str:
    base = class_names[id(fs.struct)] if fs.struct is not None else _PYTHON_TYPES[fs.type]
    text = f"list[{base}]" if fs.is_array else base
    # Nullable in some version, a records field (null when absent) or a default of null: None is a value.
    if fs.nullable or fs.type == "records" or (fs.default_kind == "value" and fs.default is None):
        text += " | None"
    return text


def _struct_lines(struct: StructSchema, class_names: dict[int, str], indent: str,
                  nested: list[StructSchema] | None) -> list[str]:
    """A class; a message's class (nested given, perhaps empty) holds its struct classes and its API's key."""
    lines = [f"{indent}class {struct.name}(Struct):"]
    inner = indent + "    "
    if nested is not None:
        lines += [f"{inner}API_KEY: ClassVar[int]", f"{inner}API_NAME: ClassVar[str]"]
    for sub in nested or []:
        lines += _struct_lines(sub, class_names, inner, None)
    fields = [(fs.name, _field_type(fs, class_names)) for fs in struct.fields]
    lines += [f"{inner}{name}: {type_text}" for name, type_text in fields]
    params = [f"{name}: {type_text} = ..." for name, type_text in fields]
    one_line = f"{inner}def __init__({', '.join(['self', '*', *params] if params else ['self'])}) -> None: ..."
    if len(one_line) <= _LINE_LENGTH:
        lines.append(one_line)
    else:
        lines += [f"{inner}def __init__(", f"{inner}    self,", f"{inner}    *,"]
        lines += [f"{inner}    {param}," for param in params]
        lines.append(f"{inner}) -> None: ...")
    return lines


def _message_lines(root: StructSchema) -> list[str]:
    nested = list(root.walk())[1:]
    class_names = {id(root): root.name, **{id(s): f"{root.name}.{s.name}" for s in nested}}
    return _struct_lines(root, class_names, "", nested)


def _signature(function: Callable[..., object]) -> str:
    # messages.py uses postponed annotations, so each annotation is already the source text.
    sig = inspect.signature(function)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"({params}) -> {sig.return_annotation}"


def render() -> str:
    """The text of messages.pyi for the schemas as they are now."""
    lines = [_HEADER, "class ApiKey(IntEnum):"]
    lines += [f"    {key.name} = {key.value}" for key in messages.ApiKey]
    lines.append("")
    lines += [f"{name}: {annotation}" for name, annotation in messages.__annotations__.items()
              if not name.startswith("_")]
    for name in messages.__all__:
        value = getattr(messages, name)
        if inspect.isfunction(value):
            lines.append(f"def {name}{_signature(value)}: ...")
    roots = {m.root.name: m.root for api in messages.APIS.values() for m in (api.request, api.response)}
    for name in messages.__all__:
        if name in roots:
            lines += ["", *_message_lines(roots[name])]
    lines += ["", "__all__ = ["]
    lines += [f"    {name!r}," for name in messages.__all__]
    lines.append("]")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    STUB_PATH.write_text(render())
    print(f"wrote {STUB_PATH}")
