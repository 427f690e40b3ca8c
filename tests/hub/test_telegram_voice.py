"""Voice notes and audio transcribed through litellm's real client (a loopback fake of the
OpenAI audio API), and a clear reply when transcription is off or fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram.voice import NO_TRANSCRIBE_MODEL, NOT_TRANSCRIBED
from scopehub.memory import Store, update_chat_settings
from tests.fakes.openai_server import FakeOpenAI, error
from tests.hub.telegram_helpers import bot_run, echo, make_hub, rows

OGG = b"OggS\x00\x02 fake opus bytes"


def test_a_voice_note_is_stored_transcribed_and_answered_like_text(tmp_path: Path) -> None:
    model = FunctionModel(echo)
    with FakeOpenAI(transcribe=lambda name, content, fields: "add buy milk to my tasks") as llm:
        hub = make_hub(
            tmp_path / "hub.db", model, transcribe_model="openai/whisper-1", transcribe_api_base=llm.base_url, transcribe_api_key="sk-fake"
        )
        update_chat_settings(hub.store, "user:42", language="Deutsch", now=1.0)

        async def scenario(hub, tg, bot) -> None:
            tg.push_media(42, "voice", content=OGG)
            (sent,) = await tg.await_sent(1, chat_id=42, timeout=30)  # litellm's first import takes seconds
            assert sent["text"] == "[tasks]\nok: [voice note, transcribed] add buy milk to my tasks"
            assert tg.calls("download") and tg.calls("sendChatAction")  # fetched; "typing…" while it is heard
            # In a group, only a voice note for the bot is transcribed (chatter costs nothing).
            tg.push_media(-100, "voice", content=OGG, user_id=7)
            tg.push_message(-100, "@hub_test_bot hello", user_id=7)
            await tg.await_sent(1, chat_id=-100)

        bot_run(tmp_path, scenario, hub=hub)
        (request,) = llm.transcription_requests
    assert request["content"] == OGG and request["filename"].endswith(".ogg")
    assert request["fields"]["model"] == "whisper-1" and request["fields"]["language"] == "de"  # the chat's language
    stored = rows(tmp_path / "hub.db", "user:42")
    assert [r[1] for r in stored] == ["[voice note, transcribed] add buy milk to my tasks", "ok: [voice note, transcribed] add buy milk to my tasks"]
    with Store(tmp_path / "hub.db") as store:
        assert store.search("user:42", "milk")[0].kind == "message"  # the transcript is searchable
    assert rows(tmp_path / "hub.db", "group:-100")[0][1] == "[voice note]"


def test_without_a_model_or_when_it_fails_the_person_is_told_and_the_note_is_kept(tmp_path: Path) -> None:
    async def off(hub, tg, bot) -> None:
        tg.push_media(42, "audio", content=OGG, file_name="memo.mp3")
        assert (await tg.await_sent(1, chat_id=42))[0]["text"] == NO_TRANSCRIBE_MODEL.format(what="audio")

    model = FunctionModel(echo)
    bot_run(tmp_path, off, hub=make_hub(tmp_path / "off.db", model))
    assert model.calls == [] and [r[1] for r in rows(tmp_path / "off.db", "user:42")] == ["[audio: memo.mp3]"]

    def broken(name: str, content: bytes, fields: dict[str, str]) -> Any:
        return error(503)

    with FakeOpenAI(transcribe=broken) as llm:
        hub = make_hub(tmp_path / "hub.db", model, transcribe_model="openai/whisper-1", transcribe_api_base=llm.base_url)

        async def failing(hub, tg, bot) -> None:
            tg.push_media(42, "voice", content=OGG)
            note = (await tg.await_sent(1, chat_id=42, timeout=30))[0]["text"]
            assert note.startswith(NOT_TRANSCRIBED.split("(")[0].format(what="voice note"))
            assert "ServiceUnavailableError" in note or "503" in note

        bot_run(tmp_path, failing, hub=hub)
    assert model.calls == [] and [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["[voice note]"]
