"""The console's pages, one module per page or concern; each gives its routes for a
:class:`~scopehub.hub.console.web.Console`."""
