"""The operator's web console (``agents-hub console``): which chats are active, where each
message went and why, exactly what each agent was sent, what scoping saves, and each
scope's memory. Read-only unless started with ``--allow-writes``.

:mod:`.app` holds the Starlette routes and write actions, :mod:`.access` the token,
loopback and CSRF rules, :mod:`.queries` the few reads of its own (portable SQL),
:mod:`.calls` one call's context section by section, :mod:`.charts` the SVG charts.
Needs the ``console`` extra (Starlette, Jinja2, uvicorn, python-multipart).
"""

from scopehub.hub.console.access import ConsoleRefused, check_listen
from scopehub.hub.console.app import ConsoleConfig, create_app

__all__ = ["ConsoleConfig", "ConsoleRefused", "check_listen", "create_app"]
