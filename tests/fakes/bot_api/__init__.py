"""A loopback fake of the Telegram Bot API for python-telegram-bot tests.

Point PTB at it with ``base_url``; requests arrive at ``/bot<TOKEN>/<method>``::

    with FakeBotAPI() as tg:
        app = ApplicationBuilder().token("123:abc").base_url(tg.base_url).build()
        tg.push_message(42, "/start", user_id=42)
        async with app:
            await app.start()
            await app.updater.start_polling(poll_interval=0.0, timeout=1)
            sent = await asyncio.to_thread(tg.wait_sent, 1)  # don't block the PTB loop
            await app.updater.stop()
            await app.stop()

Or skip HTTP polling and feed updates directly:
``await app.process_update(Update.de_json(tg.make_update(42, "hi"), app.bot))``
(the bot still needs the server for its replies and ``initialize()``'s getMe), or with no
server at all: ``Update.de_json(message_update(42, "hi"), bot)``.

How PTB 22 sends parameters (observed): without files, ``application/x-www-form-urlencoded``
where every value went through ``json.dumps`` unless it already was a string: ints
arrive as ``"42"``, booleans as ``"true"``/``"false"``, and nested objects
(``reply_markup``, ``entities``, ``reply_parameters``, ``commands``, ``scope``,
``link_preview_options``, ``allowed_updates``) as JSON text inside the form field. With
files it is ``multipart/form-data`` with the same encoding. Parameters left at their
defaults are not sent at all. The fake also accepts JSON bodies and query strings, and
decodes known fields back (see `coerce_params`), so `calls()` shows ints, bools, dicts.

Reactions: ``push_reaction(chat_id, message_id, "👎")`` queues a ``message_reaction``
update. As on Telegram, it is delivered only once a getUpdates call has asked for it in
``allowed_updates`` (Telegram remembers the last list; its default leaves out
``message_reaction``, ``message_reaction_count`` and ``chat_member``); an update of a type
not asked for is dropped, never delivered.

PTB error mapping (``telegram.request.BaseRequest._request_wrapper``): a response with
``parameters.retry_after`` raises ``telegram.error.RetryAfter`` whatever the status; 400 ->
``BadRequest``; 401/404 -> ``InvalidToken``; 403 -> ``Forbidden``; 409 -> ``Conflict``;
other statuses and dropped connections -> ``NetworkError`` (``TimedOut`` for timeouts).
Bot methods do not retry; the updater's polling loop retries getUpdates with back-off.
"""

from tests.fakes.bot_api._methods import BotAPIError
from tests.fakes.bot_api._server import FakeBotAPI
from tests.fakes.bot_api._wire import auto_entities, coerce_params, message_update, utf16_len

__all__ = [
    "BotAPIError",
    "FakeBotAPI",
    "auto_entities",
    "coerce_params",
    "message_update",
    "utf16_len",
]
