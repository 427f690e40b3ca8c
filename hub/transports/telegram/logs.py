"""Quiet logs for the Telegram process: one line per failure with its reason, tracebacks at DEBUG.

An operator reads the bot's stderr; a traceback per failed tool call or per update drowns
what matters. :class:`OneLineFormatter` writes a failure logged with its exception as one
line ending in the exception's type and message (and its cause's), and keeps the
traceback for ``HUB_LOG_LEVEL=DEBUG``. Libraries that narrate every request (httpx, whose
URLs carry the bot token; litellm, which also writes its own lines to stdout) log only
warnings, and only through the root handler, on stderr.
"""

from __future__ import annotations

import logging

__all__ = ["NOISY_LOGGERS", "OneLineFormatter", "install_quiet_logs", "quiet_library_logs"]

# Loggers that log every HTTP request or model call at INFO.
NOISY_LOGGERS = ("httpx", "httpcore", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


class OneLineFormatter(logging.Formatter):
    """A record with an exception becomes one line with the reason, unless ``tracebacks``."""

    def __init__(self, fmt: str = LOG_FORMAT, *, tracebacks: bool = False) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks or not record.exc_info or record.exc_info[1] is None:
            return super().format(record)
        exc = record.exc_info[1]
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        reasons = [_reason(exc)]
        cause = exc.__cause__ or exc.__context__
        if cause is not None and cause is not exc:
            reasons.append(_reason(cause))
        shown = "; caused by ".join(r for r in reasons if r not in line)
        return f"{line} ({shown})" if shown else line


def quiet_library_logs() -> None:
    """The noisy libraries log warnings and worse, through the root handler only (stderr).

    litellm adds a handler of its own that writes below-WARNING lines to stdout; it is
    removed (call this again once litellm is imported: it adds the handler at import).
    """
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
        if name.startswith("LiteLLM"):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.propagate = True


def install_quiet_logs(level: str) -> None:
    """One-line failures on every root handler (tracebacks when ``level`` is DEBUG), and quiet libraries."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format=LOG_FORMAT)
    tracebacks = logging.getLevelName(level) == logging.DEBUG or level == "DEBUG"
    for handler in root.handlers:
        handler.setFormatter(OneLineFormatter(LOG_FORMAT, tracebacks=tracebacks))
    quiet_library_logs()
