"""ssl.SSLContext from kafka-python-style options, for clients and for the embedded broker's listeners.

Client defaults are strict: the peer's certificate is always verified (against ssl_cafile, or the
system's trust store without one) and its host name is checked unless ssl_check_hostname=False.
TLS 1.2 is the oldest version offered. An ssl_context passed in is used as it is.
"""
from __future__ import annotations

import ssl
from typing import Callable

from fastmq.errors import ConfigurationError

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

Password = str | bytes | Callable[[], str | bytes] | None


def _load(action: Callable[[], object], what: str) -> None:
    # File and format problems are configuration errors, reported with the setting to fix.
    try:
        action()
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigurationError(f"cannot load {what}: {exc}") from exc


def _common(context: ssl.SSLContext, crlfile: str | None, ciphers: str | None) -> None:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if crlfile:
        _load(lambda: context.load_verify_locations(cafile=crlfile), f"ssl_crlfile {crlfile!r}")
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if ciphers:
        _load(lambda: context.set_ciphers(ciphers), f"ssl_ciphers {ciphers!r}")


def create_client_context(
    *,
    ssl_context: ssl.SSLContext | None = None,
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: Password = None,
    ssl_check_hostname: bool = True,
    ssl_crlfile: str | None = None,
    ssl_ciphers: str | None = None,
) -> ssl.SSLContext:
    """The context a client connection wraps its socket with.

    ssl_certfile (+ ssl_keyfile, ssl_password) is the client certificate for servers that require
    one; ssl_crlfile adds a revocation list checked for the server's certificate.
    """
    if ssl_context is not None:
        return ssl_context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = bool(ssl_check_hostname)
    context.verify_mode = ssl.CERT_REQUIRED
    if ssl_cafile:
        _load(lambda: context.load_verify_locations(cafile=ssl_cafile), f"ssl_cafile {ssl_cafile!r}")
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if ssl_certfile:
        _load(lambda: context.load_cert_chain(ssl_certfile, ssl_keyfile, ssl_password),
              f"ssl_certfile {ssl_certfile!r} / ssl_keyfile {ssl_keyfile!r}")
    elif ssl_keyfile:
        raise ConfigurationError("ssl_keyfile was given without ssl_certfile")
    _common(context, ssl_crlfile, ssl_ciphers)
    return context


def create_server_context(
    *,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: Password = None,
    ssl_cafile: str | None = None,
    ssl_client_auth: str = "none",
    ssl_crlfile: str | None = None,
    ssl_ciphers: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> ssl.SSLContext:
    """The context a listener wraps accepted sockets with.

    ssl_client_auth is Kafka's ssl.client.auth: "none", "requested" or "required"; client
    certificates are verified against ssl_cafile.
    """
    if ssl_context is not None:
        return ssl_context
    if not ssl_certfile:
        raise ConfigurationError("a TLS listener needs ssl_certfile (its certificate chain)")
    try:
        verify_mode = _CLIENT_AUTH[ssl_client_auth]
    except KeyError:
        raise ConfigurationError(
            f"ssl_client_auth must be one of {sorted(_CLIENT_AUTH)}, not {ssl_client_auth!r}") from None
    if verify_mode != ssl.CERT_NONE and not ssl_cafile:
        raise ConfigurationError(f"ssl_client_auth={ssl_client_auth!r} needs ssl_cafile to verify clients with")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load(lambda: context.load_cert_chain(ssl_certfile, ssl_keyfile, ssl_password),
          f"ssl_certfile {ssl_certfile!r} / ssl_keyfile {ssl_keyfile!r}")
    if ssl_cafile:
        _load(lambda: context.load_verify_locations(cafile=ssl_cafile), f"ssl_cafile {ssl_cafile!r}")
    context.verify_mode = verify_mode
    _common(context, ssl_crlfile, ssl_ciphers)
    return context
