"""``agents-hub``: a thin click layer over the library.

:mod:`.main` holds the root group and the memory commands; the others load lazily, beside
what they drive (:mod:`.chat`, :mod:`.telegram`, :mod:`.facts`, :mod:`.search`, :mod:`.digest`, and the
``eval`` and ``bench`` groups), so ``agents-hub import`` never imports litellm or
python-telegram-bot. :mod:`.options` is the one way every command opens the store.
"""

from scopehub.hub.cli.main import cli, main

__all__ = ["cli", "main"]
