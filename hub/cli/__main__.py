"""``python -m scopehub.hub.cli``: the same as the ``agents-hub`` command."""

from scopehub.hub.cli.main import main

main()
