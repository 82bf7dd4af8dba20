"""Python classes for the structs of the message schemas.

Every StructSchema becomes a subclass of the compiled Struct base with one __slots__ entry per field: cheap to
allocate, attribute access at slot speed, constructible by keyword with the schema's defaults:

    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False)

A class holds the union of the fields of all versions (as Kafka's own generated classes do): a decoder sets
the fields a version lacks to their defaults, an encoder skips them. The nested struct classes of a message
hang off its top-level class under Kafka's struct names (FetchResponse.PartitionData, ...).
"""
from __future__ import annotations

from typing import cast

from fastmq.kafka._native.kafka_protocol import FieldTable, Struct
from fastmq.kafka.protocol.schema import FieldSchema, MessageSchema, StructSchema

MODULE = "fastmq.kafka.protocol.messages"


def _describe(fs: FieldSchema) -> str:
    type_name = fs.struct.name if fs.struct is not None else fs.type
    text = f"{fs.name}: {'[]' if fs.is_array else ''}{type_name}, versions {fs.versions}"
    if fs.nullable:
        text += f", nullable {fs.nullable}"
    if fs.tag is not None:
        text += f", tag {fs.tag}"
    if fs.default_kind == "value":
        text += f", default {fs.default!r}"
    return text


def make_struct_class(struct: StructSchema, qualname: str, module: str = MODULE) -> type[Struct]:
    """The class of one struct; the classes of its struct fields must exist already."""
    doc = "\n".join([f"Kafka struct {struct.name}. Fields:", *("    " + _describe(fs) for fs in struct.fields)])
    # type() with three arguments is typed as returning a plain type; this one derives from Struct.
    cls = cast(type[Struct], type(struct.name, (Struct,), {
        "__slots__": tuple(struct.field_names()),
        "__module__": module,
        "__qualname__": qualname,
        "__doc__": doc,
    }))
    specs = []
    for fs in struct.fields:
        kind = fs.default_kind
        default = fs.struct.generated_class() if kind == "struct" and fs.struct is not None else fs.default
        specs.append((fs.name, default, kind))
    cls._field_table = FieldTable(cls, specs)
    cls._schema = struct
    struct.cls = cls
    return cls


def make_message_classes(message: MessageSchema, module: str = MODULE) -> type[Struct]:
    """The class of a whole request or response; its nested struct classes become its attributes."""
    root = message.root
    nested = list(root.walk())[1:]
    # Build innermost structs first: a struct's defaults refer to the classes of its struct fields.
    for struct in reversed(nested):
        make_struct_class(struct, f"{root.name}.{struct.name}", module)
    cls = make_struct_class(root, root.name, module)
    # Attributes of this class only (messages.pyi declares them per message class), hence setattr.
    for struct in nested:
        setattr(cls, struct.name, struct.cls)
    setattr(cls, "API_KEY", message.api.key)
    setattr(cls, "API_NAME", message.api.name)
    return cls
