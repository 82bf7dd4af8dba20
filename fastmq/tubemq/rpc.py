"""TubeMQ RPC: the envelope of every request and response, around the method's protobuf message.

Wire format (Apache InLong TubeMQ corerpc; framing in fastmq._native.frames, TubeMQFrameSplitter and
encode_tubemq_frame):
    frame    = [token u32 0xFF7FF4FE][serialNo i32][listSize i32] listSize x ([len i32][len bytes]), big-endian;
               the payload is cut into 8192-byte blocks, every block full but the last
    payload  = three varint-length-delimited protobuf messages (proto/tubemq/rpc.proto):
    request  = RpcConnHeader{flag 0}, RequestHeader{serviceType, protocolVer}, RequestBody{method, timeout, request}
    response = RpcConnHeader{flag 1}, ResponseHeader{status, protocolVer}, then
               RspResponseBody{method, data} (status SUCCESS) or RspExceptionBody{exceptionName, stackTrace} (ERROR)
The requester picks serialNo and the response echoes it. The C++ client leaves the zero bytes of an unused
varint reservation at the end of the payload: trailing zeros are ignored. A master in standby answers every
request with an exception whose name contains "StandbyException".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from google.protobuf.message import DecodeError, Message

from fastmq._native.frames import encode_tubemq_frame
from fastmq.errors import ProtocolError
from fastmq.tubemq._proto import rpc_pb2
from fastmq.tubemq.errors import RemoteException

if TYPE_CHECKING:
    from typing_extensions import Buffer

# RequestHeader.serviceType
SERVICE_MASTER = 1
SERVICE_BROKER_READ = 2
SERVICE_BROKER_WRITE = 3

# RequestBody.method (RpcConstants)
PRODUCER_REGISTER = 1
PRODUCER_HEARTBEAT = 2
PRODUCER_CLOSE = 3
CONSUMER_REGISTER = 4
CONSUMER_HEARTBEAT = 5
CONSUMER_CLOSE = 6
SEND_MESSAGE = 13
CONSUMER_REGISTER_TO_BROKER = 15        # opType 31 register, 32 unregister
CONSUMER_HEARTBEAT_TO_BROKER = 16
GET_MESSAGE = 17
COMMIT_OFFSET = 18

SERVICE_OF_METHOD = {
    PRODUCER_REGISTER: SERVICE_MASTER, PRODUCER_HEARTBEAT: SERVICE_MASTER, PRODUCER_CLOSE: SERVICE_MASTER,
    CONSUMER_REGISTER: SERVICE_MASTER, CONSUMER_HEARTBEAT: SERVICE_MASTER, CONSUMER_CLOSE: SERVICE_MASTER,
    SEND_MESSAGE: SERVICE_BROKER_WRITE, CONSUMER_REGISTER_TO_BROKER: SERVICE_BROKER_READ,
    CONSUMER_HEARTBEAT_TO_BROKER: SERVICE_BROKER_READ, GET_MESSAGE: SERVICE_BROKER_READ,
    COMMIT_OFFSET: SERVICE_BROKER_READ,
}

PROTOCOL_VERSION = 3                    # what the Java client sends and every server answers with
DEFAULT_TIMEOUT_MS = 10_000
STANDBY_EXCEPTION = "org.apache.inlong.tubemq.corebase.exception.StandbyException"

STATUS_SUCCESS = rpc_pb2.ResponseHeader.SUCCESS
STATUS_ERROR = rpc_pb2.ResponseHeader.ERROR
STATUS_FATAL = rpc_pb2.ResponseHeader.FATAL

# The first two messages of every request of one service and every successful response never change: written
# once, ahead of the body.
_REQUEST_CONN_HEADER = b"\x02" + rpc_pb2.RpcConnHeader(flag=0).SerializeToString()
_RESPONSE_PREFIX = (b"\x02" + rpc_pb2.RpcConnHeader(flag=1).SerializeToString()
                    + b"\x04" + rpc_pb2.ResponseHeader(status=STATUS_SUCCESS, protocolVer=PROTOCOL_VERSION)
                    .SerializeToString())
_ERROR_PREFIX = (b"\x02" + rpc_pb2.RpcConnHeader(flag=1).SerializeToString()
                 + b"\x04" + rpc_pb2.ResponseHeader(status=STATUS_ERROR, protocolVer=PROTOCOL_VERSION)
                 .SerializeToString())
_MAX_VARINT32_BYTES = 5
# (method, service type, version, timeout) -> the bytes of a request before its body: one per kind of request.
_request_prefixes: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}
# RequestHeader bytes -> (serviceType, protocolVer): a peer sends the same few headers over and over.
_request_headers: dict[bytes, tuple[int | None, int | None]] = {}
_MAX_CACHED_HEADERS = 64


class Request(NamedTuple):
    serial_no: int
    method: int
    service_type: int | None            # None: absent from the RequestHeader
    protocol_version: int | None
    timeout_ms: int | None              # None: absent (the server's default, DEFAULT_TIMEOUT_MS, applies)
    body: bytes                         # the method's serialized request message


class Response(NamedTuple):
    serial_no: int
    method: int
    data: bytes                         # the method's serialized response message


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(message: bytes) -> bytes:
    return _varint(len(message)) + message


def split_delimited(payload: Buffer, count: int = 3) -> list[bytes]:
    """The `count` varint-length-delimited messages of a payload. Bytes after them must be zeros (the C++
    client's padding); ProtocolError names what is wrong otherwise."""
    data = payload if type(payload) is bytes else bytes(payload)
    end = len(data)
    messages, pos = [], 0
    for index in range(count):
        if pos >= end:
            raise ProtocolError(f"TubeMQ RPC payload of {end} bytes ends inside message {index + 1} of {count}")
        length = data[pos]
        pos += 1
        if length & 0x80:                   # a length of more than 127 bytes: the whole varint
            length &= 0x7F
            shift = 7
            while True:
                if pos >= end:
                    raise ProtocolError(f"TubeMQ RPC payload of {end} bytes ends inside message {index + 1} "
                                        f"of {count}")
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
                if shift >= 7 * _MAX_VARINT32_BYTES:
                    raise ProtocolError("TubeMQ RPC payload: a message length runs past 5 varint bytes")
        if length > end - pos:
            raise ProtocolError(f"TubeMQ RPC message {index + 1} of {count} announces {length} bytes, "
                                f"{end - pos} are left")
        messages.append(data[pos:pos + length])
        pos += length
    if pos < end and data.count(0, pos) != end - pos:
        raise ProtocolError(f"TubeMQ RPC payload has {end - pos} bytes after its {count} messages that are not "
                            "zero padding")
    return messages


def decode_message(message_class: type[Message], data: Buffer, what: str | None = None) -> Any:
    """A protobuf message of `message_class` from data; ProtocolError when it does not parse (or misses a
    required field)."""
    try:
        return message_class.FromString(data)
    except (DecodeError, RuntimeWarning) as exc:
        raise ProtocolError(f"TubeMQ {what or message_class.__name__} does not parse: {exc}") from None


_DEFAULT = object()


def encode_request(serial_no: int, method: int, body: bytes, *, timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
                   service_type: Any = _DEFAULT, protocol_version: int | None = PROTOCOL_VERSION) -> bytes:
    """One request frame: `body` is the method's serialized request message. The service type defaults to the
    method's; None leaves a header field out."""
    if service_type is _DEFAULT:
        service_type = SERVICE_OF_METHOD.get(method)
    key = (method, service_type, protocol_version, timeout_ms)
    prefix = _request_prefixes.get(key)
    if prefix is None:
        header = rpc_pb2.RequestHeader(serviceType=service_type, protocolVer=protocol_version).SerializeToString()
        # RequestBody{method, timeout} and the tag of its `request` field: the body's length and bytes follow.
        fields = rpc_pb2.RequestBody(method=method, timeout=timeout_ms).SerializeToString() + b"\x1a"
        prefix = _request_prefixes[key] = (_REQUEST_CONN_HEADER + _delimited(header), fields)
    head, fields = prefix
    length = _varint(len(body))
    return encode_tubemq_frame(serial_no, b"".join((head, _varint(len(fields) + len(length) + len(body)), fields,
                                                    length, body)))


def decode_request(serial_no: int, payload: Buffer) -> Request:
    """A request frame's payload (from TubeMQFrameSplitter.next_frame). ProtocolError when it is not one."""
    conn, header, body = split_delimited(payload)
    if conn != _REQUEST_CONN_HEADER[1:] and decode_message(rpc_pb2.RpcConnHeader, conn, "RpcConnHeader").flag != 0:
        raise ProtocolError("TubeMQ request whose RpcConnHeader.flag is not 0 (request)")
    fields = _request_headers.get(header)
    if fields is None:
        request_header = decode_message(rpc_pb2.RequestHeader, header, "RequestHeader")
        fields = (request_header.serviceType if request_header.HasField("serviceType") else None,
                  request_header.protocolVer if request_header.HasField("protocolVer") else None)
        if len(_request_headers) < _MAX_CACHED_HEADERS:
            _request_headers[header] = fields
    request_body = decode_message(rpc_pb2.RequestBody, body, "RequestBody")
    return Request(serial_no, request_body.method, fields[0], fields[1],
                   request_body.timeout if request_body.HasField("timeout") else None, request_body.request)


def encode_response(serial_no: int, method: int, data: bytes) -> bytes:
    """A successful response frame: `data` is the method's serialized response message."""
    body = rpc_pb2.RspResponseBody(method=method, data=data).SerializeToString()
    return encode_tubemq_frame(serial_no, _RESPONSE_PREFIX + _delimited(body))


def encode_exception(serial_no: int, exception_name: str, stack_trace: str = "") -> bytes:
    """An exception response frame (status ERROR), as a standby master or a failing handler sends."""
    body = rpc_pb2.RspExceptionBody(exceptionName=exception_name, stackTrace=stack_trace).SerializeToString()
    return encode_tubemq_frame(serial_no, _ERROR_PREFIX + _delimited(body))


def decode_response(serial_no: int, payload: Buffer) -> Response:
    """A response frame's payload. RemoteException (StandbyError for a standby master) for an exception
    response; ProtocolError when the payload is not a response."""
    conn, header, body = split_delimited(payload)
    if decode_message(rpc_pb2.RpcConnHeader, conn, "RpcConnHeader").flag != 1:
        raise ProtocolError("TubeMQ response whose RpcConnHeader.flag is not 1 (response)")
    status = decode_message(rpc_pb2.ResponseHeader, header, "ResponseHeader").status
    if status == STATUS_SUCCESS:
        response = decode_message(rpc_pb2.RspResponseBody, body, "RspResponseBody")
        return Response(serial_no, response.method, response.data)
    if status == STATUS_ERROR:
        exception = decode_message(rpc_pb2.RspExceptionBody, body, "RspExceptionBody")
        raise RemoteException.from_exception(exception.exceptionName, exception.stackTrace)
    raise RemoteException("FATAL", "the server could not parse the request (ResponseHeader status FATAL)")
