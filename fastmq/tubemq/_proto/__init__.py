"""Protobuf classes generated from proto/tubemq/*.proto (rpc: the envelope; master: P2M and C2M; broker: P2B
and C2B). Regenerate after editing a .proto (tests/tubemq/test_proto_gencode.py checks they match):
    python -m grpc_tools.protoc -Iproto/tubemq --python_out=fastmq/tubemq/_proto --pyi_out=fastmq/tubemq/_proto \
        proto/tubemq/*.proto
(the .pyi stubs give the classes their fields for type checkers)
"""
