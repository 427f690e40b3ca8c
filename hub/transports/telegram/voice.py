"""Voice notes and audio, transcribed through litellm when ``HUB_TRANSCRIBE_MODEL`` is set.

The message is stored first (as its marker, ``[voice note]``), then the file is
downloaded and transcribed (any litellm transcription model: ``whisper-1``,
``groq/whisper-large-v3``, ``openai/<name>`` on an OpenAI-compatible server via
``HUB_TRANSCRIBE_API_BASE``), and the stored text becomes the transcript, which is
answered like text. Without a model, or when it fails, the person is told so in one line
and the marker stays. The chat's language (its /settings) is the hint the model gets.
"""

from __future__ import annotations

import asyncio
import logging
import os

from scopehub.hub.commands import LANGUAGES
from scopehub.hub.errors import HubError
from scopehub.hub.models.base import check_request_allowed
from scopehub.hub.settings import Settings

__all__ = [
    "MAX_AUDIO_BYTES",
    "NOT_TRANSCRIBED",
    "NO_TRANSCRIBE_MODEL",
    "Transcriber",
    "TranscriptionFailed",
    "transcribed_marker",
]

log = logging.getLogger(__name__)

MAX_AUDIO_BYTES = 20_000_000  # what a bot may download from Telegram
NO_TRANSCRIBE_MODEL = (
    "I can't listen to {what} on this bot: transcription is off (whoever runs it sets HUB_TRANSCRIBE_MODEL). "
    "I noted that you sent it; please write it down for me."
)
NOT_TRANSCRIBED = "I couldn't transcribe that {what} ({reason}). I noted that you sent it; please write it down for me."
_CODES = {name.lower(): code for code, name in LANGUAGES.items()}


class TranscriptionFailed(HubError):
    """The transcription model could not be reached or gave no text."""


def transcribed_marker(kind: str) -> str:
    """What goes before a transcript, so the agent knows it was spoken: ``[voice note, transcribed]``."""
    return f"[{kind}, transcribed]"


class Transcriber:
    """litellm's ``atranscription`` with the deployment's model, base URL, key and timeout."""

    def __init__(self, settings: Settings) -> None:
        self.model = settings.transcribe_model
        self.api_base = settings.transcribe_api_base or settings.api_base or None
        self.api_key = settings.transcribe_api_key or settings.api_key or None
        self.timeout = settings.model_timeout

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    def warm_up(self) -> None:
        """Import litellm now (seconds of CPU): the transport calls this off its event loop at start."""
        if self.model:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm  # noqa: F401

    async def transcribe(self, name: str, data: bytes, *, language: str | None = None) -> str:
        """The text spoken in ``data`` (a file called ``name``); raises :class:`TranscriptionFailed`."""
        if not self.model:
            raise TranscriptionFailed("no transcription model (HUB_TRANSCRIBE_MODEL)")
        if len(data) > MAX_AUDIO_BYTES:
            raise TranscriptionFailed("the file is over 20 MB")
        check_request_allowed(self.model, self.api_base)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        from scopehub.hub.transports.telegram.logs import quiet_library_logs

        quiet_library_logs()  # importing litellm adds its own stdout handler
        options: dict[str, object] = {"model": self.model, "file": (name, data), "timeout": self.timeout, "max_retries": 0}
        if self.api_base:
            options["api_base"] = self.api_base
            options["api_key"] = self.api_key or "sk-no-key"
        elif self.api_key:
            options["api_key"] = self.api_key
        code = _CODES.get((language or "").lower())
        if code:
            options["language"] = code
        try:
            response = await asyncio.wait_for(litellm.atranscription(**options), timeout=self.timeout + 5)
        except TimeoutError as exc:
            raise TranscriptionFailed("the transcription model took too long") from exc
        except Exception as exc:
            raise TranscriptionFailed(f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from exc
        text = " ".join(str(getattr(response, "text", "") or "").split())
        if not text:
            raise TranscriptionFailed("nothing was heard in it")
        return text
