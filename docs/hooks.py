"""mkdocs hooks: pages that are generated from the code, so that they cannot drift from it.

A page asks for generated Markdown with a comment alone on a line:
    <!-- generate: config fastmq.broker.config.BrokerConfig -->   a dataclass's fields (name, type, default, the
                                                                  comments beside or above each field)
    <!-- generate: openapi -->                                     the proxy's HTTP API from its OpenAPI spec
    <!-- generate: spark-kafka-options -->                         how format("fastmq") takes kafka.* options
    <!-- generate: include ARCHITECTURE.md -->                      a file of the repository
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generate: (\S+)(?: (\S+))? -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda match: GENERATORS[match.group(1)](match.group(2)), markdown)


def config_table(dotted: str) -> str:
    module_name, class_name = dotted.rsplit(".", 1)
    cls = getattr(importlib.import_module(module_name), class_name)
    lines, _ = inspect.getsourcelines(cls)
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source).body[0]
    assert isinstance(tree, ast.ClassDef)
    text = source.splitlines()
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for node in tree.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        default = ast.get_source_segment(source, node.value) if node.value is not None else "(required)"
        default_factory = re.fullmatch(r"(?:dataclasses\.)?field\(default_factory=(?:lambda: )?(.*)\)", default or "")
        if default_factory:
            default = default_factory.group(1)
        annotation = ast.get_source_segment(source, node.annotation) or ""
        rows.append(f"| `{node.target.id}` | {_code(annotation)} | {_code(default or '')} | {_comments(text, node)} |")
    doc = ast.get_docstring(tree) or ""         # the class's own (a dataclass without one gets its signature)
    return f"### `{class_name}`\n\n`{dotted}`{': ' + ' '.join(doc.split()) if doc else ''}\n\n" + "\n".join(rows)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _code(text: str) -> str:
    """A table cell of code (Python-Markdown's tables leave the pipe of a union type inside backticks alone)."""
    return f"`{text}`"


def _comments(text: list[str], node: ast.AnnAssign) -> str:
    """The comment lines right above a field, the comments at the end of its lines and the comment-only lines
    indented deeper than the field that follow it (a trailing comment continued)."""
    above: list[str] = []
    index = node.lineno - 2
    while index >= 0 and text[index].lstrip().startswith("#") and _indent(text[index]) == node.col_offset:
        above.insert(0, text[index].split("#", 1)[1].strip())
        index -= 1
    last = node.end_lineno or node.lineno
    beside = [line.split("#", 1)[1].strip() for line in text[node.lineno - 1:last] if "#" in line]
    for line in text[last:]:
        if not line.lstrip().startswith("#") or _indent(line) <= node.col_offset:
            break
        beside.append(line.split("#", 1)[1].strip())
    return " ".join(above + beside).replace("|", "\\|")


def openapi(_: str | None) -> str:
    from fastmq.proxy.config import ProxyConfig
    from fastmq.proxy.openapi import spec_json

    defaults = ProxyConfig()
    spec = json.loads(spec_json(defaults.max_messages_per_produce, defaults.max_messages_per_pull,
                                defaults.max_wait_ms))
    out = [spec["info"]["description"], ""]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            out += [f"### `{method.upper()} {path}`", "", operation["summary"].capitalize() + ".", ""]
            parameters = operation.get("parameters", [])
            if parameters:
                out += ["| query parameter | required | schema | meaning |", "|---|---|---|---|"]
                out += [f"| `{p['name']}` | {'yes' if p['required'] else 'no'} | {_schema(p['schema'])} | "
                        f"{p.get('description', '')} |" for p in parameters]
                out.append("")
            body = operation.get("requestBody")
            if body:
                out.append("Request body: " + "; ".join(f"`{kind}` {_schema(item['schema'])}"
                                                        for kind, item in body["content"].items()) + ".")
                out.append("")
            out += ["| status | meaning | body |", "|---|---|---|"]
            rows: dict[tuple[str, str], list[str]] = {}       # statuses with the same answer share a row
            for status, response in operation["responses"].items():
                content = response.get("content", {})
                shown = "; ".join(f"`{kind}` {_schema(item['schema'])}" for kind, item in content.items())
                rows.setdefault((response["description"], shown), []).append(status)
            out += [f"| {', '.join(statuses)} | {meaning} | {shown} |" for (meaning, shown), statuses in rows.items()]
            out.append("")
    return "\n".join(out)


def _schema(schema: dict[str, Any]) -> str:
    """A schema in one line: types, the properties of objects, constraints."""
    kind = schema.get("type", "any")
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        fields = ", ".join(f"{name}{'' if name in required else '?'}: {_schema(value)}"
                           for name, value in schema["properties"].items())
        return f"{{{fields}}}"
    if kind == "array":
        return f"[{_schema(schema.get('items', {}))}]"
    details = [f"{key} {schema[key]}" for key in ("format", "minimum", "maximum", "enum") if key in schema]
    details += [f"pattern `{schema['pattern']}`"] if "pattern" in schema else []
    text = kind + (" or null" if schema.get("nullable") else "") + (f" ({', '.join(map(str, details))})"
                                                                     if details else "")
    return text


def spark_kafka_options(_: str | None) -> str:
    from fastmq.spark.options import IGNORED_KAFKA, JAVA_NAMES, REFUSED_KAFKA

    out = ["| `kafka.` option | fastmq client option |", "|---|---|"]
    out += [f"| `kafka.{java}` | `{ours}` |" for java, ours in sorted(JAVA_NAMES.items())]
    out += ["", "Refused, with what to write instead:", "", "| `kafka.` option | instead |", "|---|---|"]
    out += [f"| `kafka.{name}` | {reason} |" for name, reason in sorted(REFUSED_KAFKA.items())]
    out += ["", "Accepted and ignored (they configure the JVM client only): "
            + ", ".join(f"`kafka.{name}`" for name in sorted(IGNORED_KAFKA)) + "."]
    return "\n".join(out)


def include(path: str | None) -> str:
    assert path is not None
    return (ROOT / path).read_text()


GENERATORS = {"config": config_table, "openapi": openapi, "spark-kafka-options": spark_kafka_options,
              "include": include}
