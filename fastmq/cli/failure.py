"""How the `fastmq` command fails: one line on stderr that says what to do, and an exit code per kind of failure.

Every subcommand raises CommandError (or lets a library error through: main() turns the common ones into one
line as well); `fastmq --debug ...` shows the traceback instead.
"""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1              # the broker refused the operation, or records failed
    USAGE = 2               # bad options (argparse's own code); nothing was sent
    UNREACHABLE = 3         # no broker answered within the timeout (nothing listens, the host does not resolve)
    NOT_FOUND = 4           # the topic or group does not exist
    INTERRUPTED = 130       # Ctrl-C
    TERMINATED = 143        # SIGTERM (128 + 15): temporary directories and brokers are cleaned up first


EXIT_CODES_HELP = "exit codes: " + ", ".join(
    f"{code.value} {description}" for code, description in (
        (ExitCode.OK, "success"), (ExitCode.FAILED, "the operation failed"),
        (ExitCode.USAGE, "bad options"), (ExitCode.UNREACHABLE, "no broker answered"),
        (ExitCode.NOT_FOUND, "no such topic or group"), (ExitCode.INTERRUPTED, "interrupted"),
        (ExitCode.TERMINATED, "terminated by SIGTERM"))) + "; --debug shows the traceback of a failure"


class CommandError(Exception):
    """A failure the command reports as one line (without the traceback) and an exit code."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def unreachable(servers: str, timeout: float) -> CommandError:
    return CommandError(f"no broker answered at {servers} within {timeout:g} s: is it running, and is the address "
                        "right? (--timeout waits longer)", ExitCode.UNREACHABLE)


def from_library_error(exc: BaseException) -> CommandError | None:
    """The one-line form of an error the client library raised (None: not one it knows)."""
    from fastmq.errors import FastMQError
    from fastmq.kafka import errors as kerrors

    if isinstance(exc, kerrors.UnknownTopicOrPartitionError):
        return CommandError(f"no such topic: {exc}", ExitCode.NOT_FOUND)
    if isinstance(exc, kerrors.GroupIdNotFoundError):
        return CommandError(f"no such group: {exc}", ExitCode.NOT_FOUND)
    if isinstance(exc, kerrors.KafkaError):
        return CommandError(_broker_error_text(exc))
    if isinstance(exc, FastMQError):
        return CommandError(str(exc.args[0]) if exc.args else type(exc).__name__)
    return None


def _broker_error_text(exc: BaseException) -> str:
    """Each failed item's own message and error name (the admin's per-item results), or the error's."""
    results = getattr(exc, "results", None)
    errors = [getattr(value, "error", value) for value in results.values()] if isinstance(results, dict) else [exc]
    return "; ".join(f"{error.args[0]} ({type(error).__name__})" if error.args else type(error).__name__
                     for error in errors if isinstance(error, BaseException))
