"""fastmq/kafka/protocol/messages.pyi: checked in, it must be what messages_stub writes from today's schemas, and
what it declares must be what the generated classes are at run time."""
import ast

from fastmq.kafka.protocol import messages
from fastmq.kafka.protocol.messages_stub import STUB_PATH, render


def test_the_checked_in_stub_is_what_the_generator_writes():
    assert STUB_PATH.read_text() == render(), (
        "messages.pyi is out of date with the schemas: run python -m fastmq.kafka.protocol.messages_stub")


def _declared(cls_node: ast.ClassDef) -> tuple[list[str], dict[str, ast.ClassDef]]:
    fields = [node.target.id for node in cls_node.body if isinstance(node, ast.AnnAssign)
              and isinstance(node.target, ast.Name) and node.target.id not in ("API_KEY", "API_NAME")]
    nested = {node.name: node for node in cls_node.body if isinstance(node, ast.ClassDef)}
    return fields, nested


def test_the_stub_declares_the_runtime_classes_fields_and_nested_classes():
    tree = ast.parse(STUB_PATH.read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef) and node.name != "ApiKey"}
    runtime = {name for name in messages.__all__ if name.endswith(("Request", "Response"))}
    assert set(classes) == runtime
    for name, node in classes.items():
        cls = getattr(messages, name)
        fields, nested = _declared(node)
        assert fields == list(cls.__slots__), name
        for nested_name, nested_node in nested.items():
            nested_cls = getattr(cls, nested_name)
            assert nested_cls.__qualname__ == f"{name}.{nested_name}"
            assert _declared(nested_node)[0] == list(nested_cls.__slots__), f"{name}.{nested_name}"


def test_the_stub_types_each_field_by_its_wire_type():
    text = STUB_PATH.read_text()
    # A few fields whose wire types cover the mapping: nullable string, int, array of structs, uuid, records.
    for line in ("    transactional_id: str | None", "    acks: int",
                 "    topic_data: list[ProduceRequest.TopicProduceData]", "        topic_id: uuid.UUID",
                 "        records: bytes | bytearray | memoryview | None"):
        assert "\n" + line + "\n" in text, line
