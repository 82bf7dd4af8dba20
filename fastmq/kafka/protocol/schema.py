"""The declarative schema language of the Kafka messages, and its parser.

Each API is written as a small indented text block (see the schemas_*.py modules). The facts in it (field
names, types, the versions each field exists in, nullability, tags, defaults) come from Apache Kafka's
message specifications (clients/src/main/resources/common/message/*.json); the notation is ours:

    Metadata 3 versions=0-13 flexible=9+
    request
      topics: []MetadataRequestTopic 0+ nullable=1+
        topic_id: uuid 10+
        name: string 0+ nullable=10+
      allow_auto_topic_creation: bool 4+ =true
    response
      ...

- header line: API name, API key, the versions fastmq speaks, the first flexible version (KIP-482) or none;
- `request` / `response` open the two messages; fields are indented two spaces per nesting level;
- field line: `name: type versions [nullable=versions] [tag=N] [=default]`; versions are `N+`, `N-M`, `N` or
  `none`; a field with `tag=` is a tagged field (only in flexible versions, written only when it differs
  from its default);
- types: bool int8 int16 uint16 int32 uint32 int64 float64 uuid string bytes records, `[]T` for arrays of
  them, `Name` / `[]Name` for a struct / an array of structs whose fields follow one level deeper;
  `struct Name` at message level declares a struct that several fields refer to by `[]Name` alone; a
  nullable struct is written after a presence byte (-1 null, 1 present);
- defaults: null, true, false or an integer; without one, numbers are 0, strings "", bytes b"", records null,
  uuids the zero UUID, arrays empty and structs a struct of defaults (Kafka's rules);
- blank lines separate APIs; lines starting with `#` are comments.

Names are snake_case forms of Kafka's (an underscore before every capital but the first), as kafka-python
3.x spells them. The parser turns the text into ApiSchema -> MessageSchema -> StructSchema -> FieldSchema
objects; structs.py makes a Python class of every StructSchema and compiler.py turns a (message, version)
into the program that the compiled interpreter runs.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from fastmq.kafka._native.kafka_protocol import Struct

PRIMITIVE_TYPES = frozenset({
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid", "string", "bytes",
    "records",
})
MAX_VERSION = 0x7FFF
ZERO_UUID = uuid.UUID(int=0)

_FIELD_LINE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*): (?P<type>\S+) (?P<versions>\S+)(?P<options>(?: \S+)*)$")
_HEADER_LINE = re.compile(r"^(?P<name>[A-Z]\w*) (?P<key>\d+) versions=(?P<versions>\S+) flexible=(?P<flexible>\S+)$")


class SchemaSyntaxError(ValueError):
    """A schema text does not follow the notation (a bug in fastmq's own definitions)."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; empty when lo > hi."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        lo, sep, hi = text.partition("-")
        return cls(int(lo), int(hi) if sep else int(lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi

    def __str__(self) -> str:
        if not self:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)

_NO_DEFAULT = object()


@dataclass(eq=False)
class FieldSchema:
    name: str
    type: str                       # a primitive type name, or "struct" for struct fields and struct arrays
    is_array: bool
    versions: Versions
    nullable: Versions
    tag: int | None                 # tagged fields only
    explicit_default: Any           # the `=value` of the definition, or _NO_DEFAULT
    struct: StructSchema | None = None

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable and version in self.versions

    @property
    def default(self) -> Any:
        """The value of the field when it is absent, as an immutable value or a factory marker.

        Arrays and structs are mutable, so their defaults are made per instance (see default_kind)."""
        if self.explicit_default is not _NO_DEFAULT:
            return self.explicit_default
        if self.is_array or self.type == "struct":
            return None
        return {"bool": False, "float64": 0.0, "uuid": ZERO_UUID, "string": "", "bytes": b"",
                "records": None}.get(self.type, 0)

    @property
    def default_kind(self) -> str:
        """'value' (share `default`), 'list' (a new empty list) or 'struct' (a new struct of defaults)."""
        if self.explicit_default is not _NO_DEFAULT:
            return "value"
        if self.is_array:
            return "list"
        return "struct" if self.type == "struct" else "value"


@dataclass(eq=False)
class StructSchema:
    name: str                       # Kafka's struct name; also the name of the generated class
    fields: list[FieldSchema] = field(default_factory=list)
    cls: type[Struct] | None = None  # set by structs.py

    def generated_class(self) -> type[Struct]:
        """The class structs.py made of this struct (encoding and decoding need it)."""
        if self.cls is None:
            raise ValueError(f"struct {self.name} has no class yet (structs.make_struct_class makes it)")
        return self.cls

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def walk(self) -> Iterator[StructSchema]:
        """This struct and every struct below it, each once."""
        seen: set[int] = set()
        stack = [self]
        while stack:
            struct = stack.pop()
            if id(struct) in seen:
                continue
            seen.add(id(struct))
            yield struct
            stack.extend(f.struct for f in reversed(struct.fields) if f.struct is not None)


@dataclass(eq=False)
class MessageSchema:
    api: ApiSchema
    kind: str                       # "request" or "response"
    root: StructSchema

    @property
    def name(self) -> str:
        return self.root.name


@dataclass(eq=False)
class ApiSchema:
    name: str                       # e.g. "Metadata"
    key: int
    versions: Versions
    flexible: Versions              # the versions that use KIP-482 compact encodings and tagged fields
    request: MessageSchema = None   # type: ignore[assignment]
    response: MessageSchema = None  # type: ignore[assignment]

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def _parse_default(text: str) -> Any:
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    return int(text, 0)


def _parse_field(line: str, where: str) -> tuple[FieldSchema, str | None]:
    match = _FIELD_LINE.match(line)
    if match is None:
        raise SchemaSyntaxError(f"{where}: cannot parse field {line!r}")
    type_text = match["type"]
    is_array = type_text.startswith("[]")
    base = type_text[2:] if is_array else type_text
    struct_name = None
    if base not in PRIMITIVE_TYPES:
        if not base[:1].isupper():
            raise SchemaSyntaxError(f"{where}: unknown type {type_text!r}")
        struct_name = base
    nullable = NO_VERSIONS
    tag = None
    default = _NO_DEFAULT
    for option in match["options"].split():
        if option.startswith("nullable="):
            nullable = Versions.parse(option[len("nullable="):])
        elif option.startswith("tag="):
            tag = int(option[len("tag="):])
        elif option.startswith("="):
            default = _parse_default(option[1:])
        else:
            raise SchemaSyntaxError(f"{where}: unknown option {option!r}")
    fs = FieldSchema(match["name"], "struct" if struct_name else base, is_array, Versions.parse(match["versions"]),
                     nullable, tag, default)
    return fs, struct_name


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@dataclass(eq=False)
class _Line:
    text: str
    children: list[_Line]


def _tree(lines: list[str]) -> list[_Line]:
    """Nests lines by indentation (any deeper indentation opens a child level)."""
    top: list[_Line] = []
    stack: list[tuple[int, list[_Line]]] = [(-1, top)]
    for line in lines:
        indent = _indent_of(line)
        while indent <= stack[-1][0]:
            stack.pop()
        node = _Line(line.strip(), [])
        stack[-1][1].append(node)
        stack.append((indent, node.children))
    return top


class _StructBuilder:
    """Turns nested lines into StructSchemas, resolving references to `struct` declarations."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.declared: dict[str, StructSchema] = {}
        self.references: list[tuple[FieldSchema, str]] = []

    def struct(self, name: str, children: list[_Line]) -> StructSchema:
        if name in self.declared:
            raise SchemaSyntaxError(f"{self.where}: struct {name} is defined twice")
        struct = self.declared[name] = StructSchema(name)
        for node in children:
            fs, struct_name = _parse_field(node.text, f"{self.where}.{name}")
            struct.fields.append(fs)
            if struct_name is None:
                if node.children:
                    raise SchemaSyntaxError(f"{self.where}.{fs.name}: a {fs.type} field has no fields")
            elif node.children:
                fs.struct = self.struct(struct_name, node.children)
            else:
                self.references.append((fs, struct_name))
        return struct

    def resolve(self) -> None:
        for fs, struct_name in self.references:
            if struct_name not in self.declared:
                raise SchemaSyntaxError(f"{self.where}.{fs.name}: struct {struct_name} is not defined")
            fs.struct = self.declared[struct_name]


def _parse_message(api: ApiSchema, kind: str, nodes: list[_Line]) -> MessageSchema:
    where = f"{api.name}{kind.capitalize()}"
    builder = _StructBuilder(where)
    for node in nodes:
        if node.text.startswith("struct "):
            builder.struct(node.text.split()[1], node.children)
    root = builder.struct(where, [node for node in nodes if not node.text.startswith("struct ")])
    builder.resolve()
    return MessageSchema(api, kind, root)


def parse_struct(name: str, text: str) -> StructSchema:
    """Parses the field lines of one standalone struct (such as a request header)."""
    builder = _StructBuilder(name)
    struct = builder.struct(name, _tree([line for line in text.splitlines() if line.strip()]))
    builder.resolve()
    return struct


def parse_api(text: str) -> ApiSchema:
    """Parses one API definition (header line, `request` block, `response` block)."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    nodes = _tree(lines)
    if len(nodes) != 3 or [n.text for n in nodes[1:]] != ["request", "response"]:
        raise SchemaSyntaxError(f"expected a header line, `request` and `response` at one level: {lines[:1]}")
    header = _HEADER_LINE.match(nodes[0].text)
    if header is None:
        raise SchemaSyntaxError(f"cannot parse API header {nodes[0].text!r}")
    api = ApiSchema(header["name"], int(header["key"]), Versions.parse(header["versions"]),
                    Versions.parse(header["flexible"]))
    api.request = _parse_message(api, "request", nodes[1].children)
    api.response = _parse_message(api, "response", nodes[2].children)
    for message in (api.request, api.response):
        _check(message)
    return api


def parse_apis(text: str) -> list[ApiSchema]:
    """Parses API definitions separated by blank lines."""
    return [parse_api(block) for block in re.split(r"\n\s*\n", text) if block.strip()]


def _check(message: MessageSchema) -> None:
    """Rules the compiled interpreter relies on."""
    api = message.api
    for struct in message.root.walk():
        names = struct.field_names()
        if len(set(names)) != len(names):
            raise SchemaSyntaxError(f"{struct.name}: duplicate field names")
        tags = [f.tag for f in struct.fields if f.tag is not None]
        if len(set(tags)) != len(tags):
            raise SchemaSyntaxError(f"{struct.name}: duplicate tags")
        for fs in struct.fields:
            if fs.tag is not None and (not api.flexible or fs.versions.lo < api.flexible.lo):
                raise SchemaSyntaxError(f"{struct.name}.{fs.name}: tagged fields need flexible versions")
