"""SASL users of the broker: PLAIN checks passwords, SCRAM-SHA-256/512 keeps only salted credentials.

Credentials are derived from the configured passwords once, at start-up (PBKDF2 is slow by design). As Kafka's
broker does, user names and passwords are used as their raw UTF-8 (no SASLprep), so Java, librdkafka and Python
clients all agree with it.
"""
from __future__ import annotations

import hmac
import os

from fastmq.errors import ConfigurationError
from fastmq.io.sasl import MECHANISM_HASHES, PlainServer, ScramCredential, ScramServer


# Users can come from a file or from this environment variable (NAME=PASSWORD lines), so that no password
# needs to be on a command line: every local user can read any process's command line (ps, /proc/PID/cmdline),
# while a process's environment and a mode-600 file are readable only by its owner.
USERS_ENVIRONMENT_VARIABLE = "FASTMQ_BROKER_USERS"


def parse_users(text: str, source: str) -> dict[str, str]:
    """NAME=PASSWORD lines (blank lines and lines starting with # are skipped) -> {name: password}."""
    users = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, password = line.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"{source} line {number}: wants NAME=PASSWORD")
        users[name.strip()] = password
    return users


def read_users(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """The users of a credentials file (None: none), then those of $FASTMQ_BROKER_USERS."""
    users = {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                users.update(parse_users(handle.read(), str(path)))
        except OSError as exc:
            raise ConfigurationError(f"cannot read the credentials file: {exc}") from None
    users.update(parse_users(os.environ.get(USERS_ENVIRONMENT_VARIABLE, ""), USERS_ENVIRONMENT_VARIABLE))
    return users


class Authenticator:
    def __init__(self, users: dict[str, str], mechanisms: tuple[str, ...], scram_iterations: int = 4096) -> None:
        self.mechanisms = tuple(mechanisms)
        self._passwords = {name: password.encode("utf-8") for name, password in users.items()}
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        for mechanism in self.mechanisms:
            hash_name = MECHANISM_HASHES.get(mechanism)
            if hash_name is None:
                continue
            for name, password in users.items():
                self._credentials[(hash_name, name)] = ScramCredential.from_password(
                    password, hash_name, iterations=scram_iterations, use_saslprep=False)

    def _verify(self, username: str, password: str) -> bool:
        expected = self._passwords.get(username)
        return expected is not None and hmac.compare_digest(expected, password.encode("utf-8"))

    def server(self, mechanism: str) -> PlainServer | ScramServer:
        """The server side of one authentication exchange."""
        if mechanism not in self.mechanisms:
            raise ConfigurationError(f"SASL mechanism {mechanism!r} is not enabled")
        if mechanism == "PLAIN":
            return PlainServer(self._verify)
        hash_name = MECHANISM_HASHES[mechanism]
        return ScramServer(hash_name, lambda name: self._credentials.get((hash_name, name)))
