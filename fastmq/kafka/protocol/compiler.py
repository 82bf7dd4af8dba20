"""Compiles a message schema at one version into the program the native interpreter runs.

For every struct the program is a StructCodec: the fields present in that version in wire order, each with
its resolved wire type, nullability in that version, slot and nested codec, then the tagged fields sorted by
tag. Compact (KIP-482) encodings follow from the version being flexible. Each struct also knows the fewest
bytes an instance can take, so that the decoder can reject a forged array count before allocating anything.
"""
from __future__ import annotations

from typing import Any

from fastmq.kafka._native.kafka_protocol import KINDS, StructCodec, default_struct
from fastmq.kafka.protocol.schema import FieldSchema, MessageSchema, StructSchema

# What the native interpreter takes per field: name, kind, element kind, nullable, tag (-1: none), element
# minimum size, nested codec, the value to omit a tagged field at, whether to omit it when empty.
FieldSpec = tuple[str, int, int, bool, int, int, "StructCodec | None", Any, bool]

_FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "float64": 8, "uuid": 16}


def _min_size(type_name: str, sub: StructCodec | None, compact: bool) -> int:
    """Fewest bytes one value of a (non-array) type takes."""
    if type_name in _FIXED_SIZES:
        return _FIXED_SIZES[type_name]
    if type_name == "struct":
        if sub is None:
            raise ValueError("a struct field needs its struct's codec")
        return sub.min_size
    if compact:
        return 1                    # a one-byte uvarint length
    return 2 if type_name == "string" else 4


class _Compiler:
    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.done: dict[int, StructCodec] = {}

    def struct(self, struct: StructSchema) -> StructCodec:
        codec = self.done.get(id(struct))
        if codec is not None:
            return codec
        regular: list[FieldSpec] = []
        tagged: list[tuple[int, FieldSpec]] = []
        min_size = 1 if self.flexible else 0   # the tagged-field count
        for fs in struct.fields:
            if not fs.present_in(self.version):
                continue
            spec, size = self.field(fs)
            if fs.tag is not None and self.flexible:
                tagged.append((fs.tag, spec))
            else:
                regular.append(spec)
                min_size += size
        tagged.sort(key=lambda item: item[0])
        codec = StructCodec(struct.generated_class(), f"{struct.name} v{self.version}", self.flexible, regular,
                            [spec for _, spec in tagged], min_size)
        self.done[id(struct)] = codec
        return codec

    def field(self, fs: FieldSchema) -> tuple[FieldSpec, int]:
        sub = self.struct(fs.struct) if fs.struct is not None else None
        value_size = _min_size(fs.type, sub, self.flexible)
        if fs.type == "struct" and not fs.is_array and fs.nullable_in(self.version):
            value_size = 1      # a null struct is its presence byte alone
        if fs.is_array:
            kind, elem_kind, elem_min_size = KINDS["array"], KINDS[fs.type], value_size
            size = 1 if self.flexible else 4
        else:
            kind, elem_kind, elem_min_size = KINDS[fs.type], 0, 0
            size = value_size
        omit_if_empty = fs.default_kind == "list"
        if fs.default_kind == "struct" and fs.struct is not None:
            omit_value = default_struct(fs.struct.generated_class())
        else:
            omit_value = fs.default
        tag = fs.tag if fs.tag is not None and self.flexible else -1
        spec = (fs.name, kind, elem_kind, fs.nullable_in(self.version), tag, elem_min_size, sub, omit_value,
                omit_if_empty)
        return spec, size


def compile_message(message: MessageSchema, version: int) -> StructCodec:
    """The codec of a whole request or response body at one version."""
    if version not in message.api.versions:
        raise ValueError(f"{message.name} has no version {version} (fastmq speaks {message.api.versions})")
    return _Compiler(version, message.api.is_flexible(version)).struct(message.root)


def compile_struct(struct: StructSchema, version: int, flexible: bool) -> StructCodec:
    """The codec of a standalone struct (request headers)."""
    return _Compiler(version, flexible).struct(struct)
