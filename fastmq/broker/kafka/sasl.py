"""SaslHandshake and SaslAuthenticate (the server side of Kafka's SASL framing; the mechanisms are fastmq.io.sasl).

Handshake v1 + SaslAuthenticate is what current clients use: each SASL message travels in a SaslAuthenticate
request and its answer. Handshake v0 is the old framing: the frames that follow are bare SASL tokens (the front
end handles them). A failed exchange is answered with SASL_AUTHENTICATION_FAILED and the connection accepts
nothing more (Kafka closes it too).
"""
from __future__ import annotations

from typing import Any

from fastmq.broker.kafka.front import Request
from fastmq.io.errors import AuthenticationError
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

NONE = 0
UNSUPPORTED_SASL_MECHANISM = kerrors.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE = kerrors.IllegalSaslStateError.errno
SASL_AUTHENTICATION_FAILED = kerrors.SaslAuthenticationFailedError.errno


def handle_sasl_handshake(request: Request, body: Any) -> None:
    session = request.session
    authenticator = request.broker.authenticator
    mechanisms = list(authenticator.mechanisms) if authenticator is not None else []
    if not session.listener.uses_sasl or session.authenticated or session.sasl is not None:
        request.respond(kp.SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=mechanisms))
        return
    if authenticator is None or body.mechanism not in mechanisms:
        request.respond(kp.SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms))
        return
    session.sasl = authenticator.server(body.mechanism)
    session.sasl_raw = request.version == 0
    request.respond(kp.SaslHandshakeResponse(error_code=NONE, mechanisms=mechanisms))


def handle_sasl_authenticate(request: Request, body: Any) -> None:
    session = request.session
    if session.sasl is None or session.authenticated:
        request.respond(kp.SaslAuthenticateResponse(error_code=ILLEGAL_SASL_STATE,
                                                    error_message="SaslAuthenticate without a SaslHandshake",
                                                    auth_bytes=b""))
        session.failed = True
        return
    try:
        challenge = session.sasl.process(bytes(body.auth_bytes))
    except AuthenticationError as exc:
        session.sasl = None
        session.failed = True
        request.respond(kp.SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                                    auth_bytes=b""))
        return
    if session.sasl.complete:
        session.authenticated = True
        session.principal = session.info.principal = session.sasl.username
        session.sasl = None
    request.respond(kp.SaslAuthenticateResponse(error_code=NONE, error_message=None, auth_bytes=challenge or b"",
                                                session_lifetime_ms=0))


HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
}
