"""SASL mechanisms as state machines, independent of any protocol's framing: PLAIN (RFC 4616) and SCRAM
(RFC 5802, with SHA-256 from RFC 7677 and SHA-512 as Kafka uses it), client and server side.

A protocol package moves the messages (Kafka: SaslHandshake + SaslAuthenticate); these classes only
produce and check them:

    client = ScramClient("alice", "secret", "sha256")   server = ScramServer("sha256", lookup)
    msg = client.first_message()                 ->     reply = server.process(msg)        (server-first)
    msg = client.process(reply)                  ->     reply = server.process(msg)        (server-final)
    client.process(reply) is None, client.complete       server.complete, server.username

SaslStep runs a client state machine as one step of a connection's handshake (fastmq.io.adapter), over
whatever framing the protocol gives it.

SCRAM messages (RFC 5802 section 7), all ASCII/UTF-8 text, attributes comma-separated:
    client-first  gs2-header client-first-bare      gs2-header = "n,," or "n,a=<authzid>,"
                  client-first-bare = "n=<user>,r=<client nonce>[,<extensions>]"
    server-first  "r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>"
    client-final  "c=<base64 gs2-header>,r=<nonce>,p=<base64 proof>"
    server-final  "v=<base64 server signature>"  or  "e=<error>"
    SaltedPassword = PBKDF2-HMAC-H(password, salt, i); ClientKey = HMAC(SaltedPassword, "Client Key")
    StoredKey = H(ClientKey); AuthMessage = client-first-bare + "," + server-first + "," + client-final
    without ",p=..."; proof = ClientKey XOR HMAC(StoredKey, AuthMessage);
    ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)
User names escape "=" as "=3D" and "," as "=2C". Channel binding (-PLUS) is not offered.

Every malformed or refused message raises AuthenticationError, never anything else.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass
from typing import Callable

from fastmq.errors import ConfigurationError
from fastmq.io.adapter import AdapterConnection, HandshakeStep
from fastmq.io.errors import AuthenticationError

SCRAM_HASHES = {"sha1": "SCRAM-SHA-1", "sha256": "SCRAM-SHA-256", "sha512": "SCRAM-SHA-512"}
MECHANISM_HASHES = {mechanism: name for name, mechanism in SCRAM_HASHES.items()}
# RFC 5802 asks for at least 4096; Kafka's broker refuses fewer too. More than the maximum would let a
# hostile server make the client spin in PBKDF2 for minutes.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 1_000_000
# Client messages larger than this are refused before parsing (a user name and a proof fit easily).
_MAX_MESSAGE = 16384


def saslprep(text: str) -> str:
    """SASLprep (RFC 4013) for user names and passwords, via Python's RFC 3454 stringprep tables.

    Maps non-ASCII spaces to U+0020 and removes characters "commonly mapped to nothing", applies NFKC
    (Unicode 3.2 tables), rejects prohibited characters and checks the bidirectional rule. Unassigned
    code points are allowed (RFC 4013's "query" profile). Note: Kafka's Java clients and brokers do not
    apply SASLprep (they hash the raw UTF-8), so the Kafka package turns it off; the results differ only
    for non-ASCII or control characters.
    """
    mapped = "".join(" " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch))
    normalized = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    for ch in normalized:
        if (stringprep.in_table_c12(ch) or stringprep.in_table_c21_c22(ch) or stringprep.in_table_c3(ch)
                or stringprep.in_table_c4(ch) or stringprep.in_table_c5(ch) or stringprep.in_table_c6(ch)
                or stringprep.in_table_c7(ch) or stringprep.in_table_c8(ch) or stringprep.in_table_c9(ch)):
            raise AuthenticationError(f"prohibited character U+{ord(ch):04X} in a SASL user name or password")
    if any(stringprep.in_table_d1(ch) for ch in normalized):
        if any(stringprep.in_table_d2(ch) for ch in normalized) or not (
                stringprep.in_table_d1(normalized[0]) and stringprep.in_table_d1(normalized[-1])):
            raise AuthenticationError("a SASL user name or password breaks the bidirectional-text rule")
    return normalized


def _prepare(text: str, use_saslprep: bool) -> bytes:
    return (saslprep(text) if use_saslprep else text).encode("utf-8")


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str:
    parts = name.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part.startswith("3D"):
            out.append("=" + part[2:])
        elif part.startswith("2C"):
            out.append("," + part[2:])
        else:
            raise AuthenticationError("malformed SCRAM user name: '=' must be followed by 2C or 3D")
    return "".join(out)


def _nonce() -> str:
    # URL-safe base64 is printable and never contains ',' (RFC 5802's only forbidden nonce character).
    return secrets.token_urlsafe(24)


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise AuthenticationError(f"malformed SCRAM message: {what} is not base64") from None


def _decode(message: bytes, what: str) -> str:
    if len(message) > _MAX_MESSAGE:
        raise AuthenticationError(f"SCRAM {what} is too long ({len(message)} bytes)")
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError(f"SCRAM {what} is not UTF-8") from None


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """'a=1,b=2' -> [('a', '1'), ('b', '2')]. RFC 5802's attributes are one letter; extension names may
    be longer (Kafka's "tokenauth"). A value may contain '='."""
    pairs = []
    for item in text.split(","):
        key, separator, value = item.partition("=")
        if not separator or not key.isascii() or not key.isalpha():
            raise AuthenticationError(f"malformed SCRAM {what}: attribute {item[:20]!r}")
        pairs.append((key, value))
    return pairs


class _ScramHash:
    """The primitives of one SCRAM hash function."""

    def __init__(self, hash_name: str) -> None:
        if hash_name not in SCRAM_HASHES:
            raise ValueError(f"unsupported SCRAM hash {hash_name!r}; use one of {sorted(SCRAM_HASHES)}")
        self.name = hash_name
        self.mechanism = SCRAM_HASHES[hash_name]

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.name, password, salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What a server stores per user and mechanism (never the password)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(cls, password: str, hash_name: str = "sha256", *, salt: bytes | None = None,
                      iterations: int = MIN_ITERATIONS, use_saslprep: bool = True) -> "ScramCredential":
        scram = _ScramHash(hash_name)
        salt = salt if salt is not None else secrets.token_bytes(16)
        salted = scram.salted_password(_prepare(password, use_saslprep), salt, iterations)
        return cls(salt, iterations, scram.digest(scram.hmac(salted, b"Client Key")),
                   scram.hmac(salted, b"Server Key"))


class PlainClient:
    """SASL PLAIN: one message carrying the password (use it only over TLS)."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "", *, use_saslprep: bool = False) -> None:
        self._message = b"\0".join((authzid.encode("utf-8"), _prepare(username, use_saslprep),
                                    _prepare(password, use_saslprep)))
        self.complete = False

    def first_message(self) -> bytes:
        return self._message

    def process(self, server_message: bytes) -> bytes | None:
        """The server's (empty) answer; refusal comes from the protocol layer as an error code."""
        self.complete = True
        return None


class PlainServer:
    """Checks a PLAIN message with verify(username, password) -> bool."""

    mechanism = "PLAIN"

    def __init__(self, verify: Callable[[str, str], bool]) -> None:
        self._verify = verify
        self.complete = False
        self.username: str | None = None

    def process(self, client_message: bytes) -> bytes:
        if self.complete:
            raise AuthenticationError("PLAIN exchange is already complete")
        if len(client_message) > _MAX_MESSAGE:
            raise AuthenticationError("PLAIN message is too long")
        parts = bytes(client_message).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationError("malformed PLAIN message: expected authzid NUL user NUL password")
        try:
            authzid, username, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationError("malformed PLAIN message: not UTF-8") from None
        if not username or not password:
            raise AuthenticationError("PLAIN user name and password must not be empty")
        if authzid and authzid != username:
            raise AuthenticationError("PLAIN authorization id must be empty or equal the user name")
        if not self._verify(username, password):
            raise AuthenticationError(f"authentication failed for user {username!r}")
        self.username = username
        self.complete = True
        return b""


class ScramClient:
    """The client side of SCRAM-SHA-1/256/512."""

    def __init__(self, username: str, password: str, hash_name: str = "sha256", *, authzid: str = "",
                 nonce: str | None = None, extensions: dict[str, str] | None = None, use_saslprep: bool = True,
                 min_iterations: int = MIN_ITERATIONS, max_iterations: int = MAX_ITERATIONS) -> None:
        self._hash = _ScramHash(hash_name)
        self.mechanism = self._hash.mechanism
        self._password = _prepare(password, use_saslprep)
        name = saslprep(username) if use_saslprep else username
        self._nonce = nonce if nonce is not None else _nonce()
        if not self._nonce or "," in self._nonce:
            raise ValueError("a SCRAM nonce must be non-empty and contain no ','")
        self._gs2_header = f"n,{'a=' + escape_username(authzid) if authzid else ''},"
        bare = f"n={escape_username(name)},r={self._nonce}"
        for key, value in (extensions or {}).items():
            bare += f",{key}={value}"
        self._first_bare = bare
        self._min_iterations = min_iterations
        self._max_iterations = max_iterations
        self._server_signature: bytes | None = None
        self._step = 0
        self.complete = False

    def first_message(self) -> bytes:
        if self._step != 0:
            raise AuthenticationError("SCRAM client-first was already sent")
        self._step = 1
        return (self._gs2_header + self._first_bare).encode("utf-8")

    def process(self, server_message: bytes) -> bytes | None:
        """server-first -> client-final; server-final -> None (the server proved it knows the password)."""
        if self._step == 1:
            self._step = 2
            return self._client_final(_decode(server_message, "server-first message"))
        if self._step == 2:
            self._step = 3
            self._verify_server_final(_decode(server_message, "server-final message"))
            self.complete = True
            return None
        raise AuthenticationError("unexpected SCRAM message: the exchange is not in progress")

    def _client_final(self, server_first: str) -> bytes:
        attributes = _attributes(server_first, "server-first message")
        if attributes and attributes[0][0] == "e":
            raise AuthenticationError(f"the server refused SCRAM authentication: {attributes[0][1]}")
        if attributes and attributes[0][0] == "m":
            raise AuthenticationError("the server requires a SCRAM extension this client does not know")
        if len(attributes) < 3 or [key for key, _ in attributes[:3]] != ["r", "s", "i"]:
            raise AuthenticationError("malformed SCRAM server-first message: expected r=, s=, i=")
        nonce, salt_b64, iterations_text = (value for _, value in attributes[:3])
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationError("SCRAM server nonce does not extend the client nonce")
        salt = _b64decode(salt_b64, "the salt")
        if not iterations_text.isdigit() or len(iterations_text) > 9:
            raise AuthenticationError(f"malformed SCRAM iteration count {iterations_text[:20]!r}")
        iterations = int(iterations_text)
        if not self._min_iterations <= iterations <= self._max_iterations:
            raise AuthenticationError(
                f"SCRAM iteration count {iterations} is outside [{self._min_iterations}, {self._max_iterations}]")
        scram = self._hash
        salted = scram.salted_password(self._password, salt, iterations)
        client_key = scram.hmac(salted, b"Client Key")
        without_proof = f"c={base64.b64encode(self._gs2_header.encode('utf-8')).decode('ascii')},r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode("utf-8")
        signature = scram.hmac(scram.digest(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = scram.hmac(scram.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("utf-8")

    def _verify_server_final(self, server_final: str) -> None:
        attributes = _attributes(server_final, "server-final message")
        key, value = attributes[0]
        if key == "e":
            raise AuthenticationError(f"the server refused SCRAM authentication: {value}")
        if key != "v":
            raise AuthenticationError("malformed SCRAM server-final message: expected v=")
        if not hmac.compare_digest(_b64decode(value, "the server signature"), self._server_signature or b""):
            raise AuthenticationError("the server's SCRAM signature is wrong: it does not know the password")


class ScramServer:
    """The server side of SCRAM: lookup(username) returns the user's ScramCredential or None."""

    def __init__(self, hash_name: str, lookup: Callable[[str], ScramCredential | None], *,
                 nonce: str | None = None) -> None:
        self._hash = _ScramHash(hash_name)
        self.mechanism = self._hash.mechanism
        self._lookup = lookup
        self._server_nonce = nonce if nonce is not None else _nonce()
        self._step = 0
        self.complete = False
        self.username: str | None = None
        self.authzid: str | None = None
        self.extensions: dict[str, str] = {}

    def process(self, client_message: bytes) -> bytes:
        if self._step == 0:
            self._step = 1
            return self._server_first(_decode(client_message, "client-first message"))
        if self._step == 1:
            self._step = 2
            result = self._server_final(_decode(client_message, "client-final message"))
            self.complete = True
            return result
        raise AuthenticationError("unexpected SCRAM message: the exchange is over")

    def _server_first(self, client_first: str) -> bytes:
        header_end = client_first.find(",", client_first.find(",") + 1)
        if header_end < 0:
            raise AuthenticationError("malformed SCRAM client-first message: no GS2 header")
        gs2_header, bare = client_first[:header_end + 1], client_first[header_end + 1:]
        flag, authzid = gs2_header.split(",")[:2]
        if flag.startswith("p="):
            raise AuthenticationError("SCRAM channel binding is not supported by this server")
        if flag not in ("n", "y"):
            raise AuthenticationError(f"malformed SCRAM GS2 header {gs2_header[:20]!r}")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationError("malformed SCRAM authorization id")
        attributes = _attributes(bare, "client-first message")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise AuthenticationError("malformed SCRAM client-first message: expected n=, r=")
        if any(key == "m" for key, _ in attributes):
            raise AuthenticationError("SCRAM mandatory extensions are not supported")
        username = unescape_username(attributes[0][1])
        client_nonce = attributes[1][1]
        if not username or not client_nonce:
            raise AuthenticationError("SCRAM user name and nonce must not be empty")
        self.extensions = dict(attributes[2:])
        self.authzid = unescape_username(authzid[2:]) if authzid else None
        self.username = username
        self._gs2_header = gs2_header
        self._first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        credential = self._lookup(username)
        # An unknown user gets a made-up credential and fails at the proof, like a wrong password, so
        # that user names cannot be probed.
        self._known = credential is not None
        self._credential = credential if credential is not None else ScramCredential(
            secrets.token_bytes(16), MIN_ITERATIONS, secrets.token_bytes(64), secrets.token_bytes(64))
        salt = base64.b64encode(self._credential.salt).decode("ascii")
        self._server_first_message = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first_message.encode("utf-8")

    def _server_final(self, client_final: str) -> bytes:
        proof_at = client_final.rfind(",p=")
        if proof_at < 0:
            raise AuthenticationError("malformed SCRAM client-final message: no proof")
        without_proof = client_final[:proof_at]
        attributes = _attributes(without_proof, "client-final message")
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise AuthenticationError("malformed SCRAM client-final message: expected c=, r=")
        if _b64decode(attributes[0][1], "the channel binding") != self._gs2_header.encode("utf-8"):
            raise AuthenticationError("SCRAM channel binding data does not match the GS2 header")
        if attributes[1][1] != self._nonce:
            raise AuthenticationError("SCRAM client-final nonce does not match")
        proof = _b64decode(client_final[proof_at + 3:], "the proof")
        scram = self._hash
        credential = self._credential
        auth_message = f"{self._first_bare},{self._server_first_message},{without_proof}".encode("utf-8")
        signature = scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationError(f"authentication failed for user {self.username!r}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(scram.digest(client_key), credential.stored_key) or not self._known:
            raise AuthenticationError(f"authentication failed for user {self.username!r}")
        server_signature = scram.hmac(credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode('ascii')}".encode("utf-8")


def create_client(mechanism: str, username: str, password: str, **options: object) -> PlainClient | ScramClient:
    """The client state machine for a mechanism name: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (or -1)."""
    if mechanism == "PLAIN":
        return PlainClient(username, password, **options)  # type: ignore[arg-type]
    if mechanism in MECHANISM_HASHES:
        return ScramClient(username, password, MECHANISM_HASHES[mechanism], **options)  # type: ignore[arg-type]
    raise ConfigurationError(f"unsupported SASL mechanism {mechanism!r}; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")


# exchange(conn, message, on_reply): send one SASL message the protocol's way; on_reply(server message) with the
# answer. A refusal the protocol reports (an error code) is the exchange's to turn into conn.close(error).
SaslExchange = Callable[[AdapterConnection, bytes, Callable[[bytes], None]], None]


class SaslStep(HandshakeStep):
    """A handshake step that authenticates with a client state machine (PlainClient, ScramClient)."""

    def __init__(self, client: PlainClient | ScramClient, exchange: SaslExchange) -> None:
        self.client = client
        self._exchange = exchange

    def start(self, conn: AdapterConnection, done: Callable[[], None]) -> None:
        client = self.client

        def answered(server_message: bytes) -> None:
            try:
                reply = client.process(server_message)
            except AuthenticationError as exc:
                conn.close(exc)
                return
            if reply is None:
                done()
            else:
                self._exchange(conn, reply, answered)

        self._exchange(conn, client.first_message(), answered)
