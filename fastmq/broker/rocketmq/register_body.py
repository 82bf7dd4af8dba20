"""RegisterBrokerBody in its compressed form: what an Apache broker with `compressedRegister=true` sends in
REGISTER_BROKER 103 (org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody.encode(true) / decode).

The body is one zlib stream (java.util.zip.Deflater at BEST_COMPRESSION: a zlib header, raw deflate, Adler-32).
Inflated, it is a sequence of sections; every int is 4 bytes big-endian (signed, as Java writes them), every text
UTF-8:

    int   dataVersion length      bytes  dataVersion, JSON: {"stateVersion":0,"timestamp":...,"counter":N}
    int   topic count N           N x (int length, bytes: one TopicConfig in its compact text form)
    int   filterServerList length bytes  filterServerList, JSON: ["ip:port", ...]
    since 5.0.0 (the request's version >= 413, MQVersion.Version.V5_0_0.ordinal()):
    int   mapping count M         M x (int length, bytes: one TopicQueueMappingInfo as JSON)

A TopicConfig's compact text (TopicConfig.encode()) is its fields joined by single spaces:
    topicName readQueueNums writeQueueNums perm topicFilterType [attributes as JSON, 5.x]
topicFilterType is SINGLE_TAG or MULTI_TAG. topicSysFlag and order are not in it: a compressed registration
registers every topic with topicSysFlag 0, at Apache's namesrv as here.

Which brokers send it. Apache's 4.x brokers send the compressed body with the header field compressed=true. Its 5.x
brokers (since RIP-32, apache/rocketmq#3978, checked in 5.5.0's bytecode) always send compressed=false, even when
the body is compressed: Apache's own 5.x namesrv then reads the zlib bytes as JSON and answers "Failed to decode
RegisterBrokerBody". A JSON body starts with "{" or white space, never with a zlib header (whose first byte's low
nibble is 8 and whose first two bytes are a multiple of 31), so is_deflated() tells the two forms apart by the body
itself, and such a broker registers here.

Bounds. The inflated body may not exceed MAX_INFLATED (16 MiB, RocketMQ's frame limit: the compact form is a
fraction of the JSON form, so an uncompressed registration of the same topics could not be larger); a length or
count that runs past the inflated bytes, a negative one, text that is not UTF-8 or a TopicConfig line that is not
in the form above raise CorruptDataError. Bytes after the last section are ignored, as Apache's decoder ignores
them: that is how a 4.x namesrv reads a 5.x body. The mapping entries (static topics, which this namesrv does not
serve) are stepped over unread, as uncompressed registrations' topicQueueMappingInfoMap is.

The namesrv checks bodyCrc32 (a header field, CRC-32 of the body as sent & 0x7FFFFFFF; 0 means unchecked) for
every registration, compressed or not, as Apache's DefaultRequestProcessor.checksum does: body_crc32().
"""
from __future__ import annotations

import re
import struct
import zlib
from typing import Any

from fastmq.errors import CorruptDataError
from fastmq.store.config import loads_lenient

MAX_INFLATED = 16 << 20
MAPPING_SINCE_VERSION = 413            # MQVersion.Version.V5_0_0.ordinal()
FILTER_TYPES = frozenset(("SINGLE_TAG", "MULTI_TAG"))
JAVA_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)   # what Integer.parseInt takes
INT = struct.Struct(">i")


def body_crc32(body: bytes) -> int:
    """The bodyCrc32 a broker puts in REGISTER_BROKER's header (UtilAll.crc32: CRC-32 & 0x7FFFFFFF)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def is_deflated(body: bytes) -> bool:
    """True if the body starts with a zlib header (CM 8, header check a multiple of 31): a compressed body."""
    return len(body) >= 2 and body[0] & 0x0F == 8 and ((body[0] << 8) | body[1]) % 31 == 0


class _Reader:
    """A cursor over the inflated sections; every read checks the bytes are there."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _int(self, what: str, size: int) -> int:
        """The next int, a length or count whose `size`-byte units must fit in the bytes after it."""
        if self.pos + 4 > len(self.data):
            raise CorruptDataError(f"compressed RegisterBrokerBody ends before the {what}")
        value: int = INT.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        left = len(self.data) - self.pos
        if value < 0 or value * size > left:
            raise CorruptDataError(f"compressed RegisterBrokerBody: the {what} {value} runs past its end "
                                   f"({left} bytes left)")
        return value

    def length(self, what: str) -> int:
        return self._int(what, 1)

    def count(self, what: str) -> int:
        """A count of entries: each is at least a length int, so a count the bytes left cannot hold is refused
        at once."""
        return self._int(what, 4)

    def text(self, what: str) -> str:
        size = self.length(f"{what} length")
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptDataError(f"compressed RegisterBrokerBody: the {what} is not UTF-8: {exc}") from None

    def skip(self, what: str) -> None:
        size = self.length(f"{what} length")     # not `self.pos += ...`: that would add to pos before the read
        self.pos += size


def _java_int(field: str, line: str) -> int:
    if JAVA_INT.fullmatch(field) is None or not -2 ** 31 <= int(field) < 2 ** 31:
        raise CorruptDataError(f"topic config {line[:80]!r}: {field[:20]!r} is not an int")
    return int(field)


def topic_config_of(line: str) -> tuple[str, dict[str, int]]:
    """One compact TopicConfig line -> (topic, its topicConfigTable entry as the JSON form carries it)."""
    fields = line.split(" ")
    while fields and not fields[-1]:        # Java's String.split drops trailing empty fields
        fields.pop()
    if len(fields) < 5 or not fields[0]:
        raise CorruptDataError(f"topic config {line[:80]!r} is not 'name readQueueNums writeQueueNums perm "
                               "topicFilterType [attributes]'")
    if fields[4] not in FILTER_TYPES:
        raise CorruptDataError(f"topic config {line[:80]!r}: topicFilterType {fields[4][:20]!r} is not "
                               "SINGLE_TAG or MULTI_TAG")
    return fields[0], {"readQueueNums": _java_int(fields[1], line), "writeQueueNums": _java_int(fields[2], line),
                       "perm": _java_int(fields[3], line), "topicSysFlag": 0}


def inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, MAX_INFLATED + 1)
    except zlib.error as exc:
        raise CorruptDataError(f"compressed RegisterBrokerBody is not a zlib stream: {exc}") from None
    if len(data) > MAX_INFLATED:
        raise CorruptDataError(f"compressed RegisterBrokerBody inflates past {MAX_INFLATED} bytes")
    return data


def decode_compressed(body: bytes, version: int) -> tuple[Any, dict[str, dict[str, int]]]:
    """A compressed RegisterBrokerBody sent by a broker of remoting `version` -> (dataVersion, topicConfigTable
    in the JSON form's shape); CorruptDataError if it is not one."""
    reader = _Reader(inflate(body))
    data_version_text = reader.text("dataVersion")
    try:
        data_version = loads_lenient(data_version_text)
    except ValueError as exc:
        raise CorruptDataError(f"compressed RegisterBrokerBody: dataVersion is not JSON: {exc}") from None
    if not isinstance(data_version, dict):
        raise CorruptDataError("compressed RegisterBrokerBody: dataVersion is not a JSON object")
    table = dict(topic_config_of(reader.text("topic config")) for _ in range(reader.count("topic configs")))
    reader.skip("filterServerList")
    if version >= MAPPING_SINCE_VERSION:
        for _ in range(reader.count("topic queue mappings")):
            reader.skip("topic queue mapping")
    return data_version, table
