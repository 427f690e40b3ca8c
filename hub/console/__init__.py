"""The operator's web console (``agents-hub console``): find, follow, read and fix.

Which chats are active, where each message went and why, exactly what each agent (and the
LLM router and the fact extractor) was sent and answered, why a call failed, what scoping
saves, each scope's memory; search and filters over a scope; with ``--allow-writes``,
fact corrections, forgetting, cancelling and erasing (each confirmed and audited), a
replay of a message's context, and a sandbox chat.

:mod:`.app` assembles the routes of :mod:`.pages` (one module per page or concern) around
:class:`.web.Console` (templates, CSRF, notices); :mod:`.access` and :mod:`.session` hold
the token, sessions and loopback rules; :mod:`.urls` the encoded scope ids; :mod:`.queries`
and :mod:`.stats` the reads of its own (portable SQL); :mod:`.calls`, :mod:`.hubcalls` and
:mod:`.toolloop` one call's views; :mod:`.charts` the SVG charts.
Needs the ``console`` extra (Starlette, Jinja2, uvicorn, python-multipart).
"""

from scopehub.hub.console.access import ConsoleRefused, check_listen
from scopehub.hub.console.app import create_app
from scopehub.hub.console.web import ConsoleConfig

__all__ = ["ConsoleConfig", "ConsoleRefused", "check_listen", "create_app"]
