"""MkDocs hook: the pages generated from the code and the reports, so they cannot drift.

- ``<!-- settings-table -->`` becomes the table of every field of the settings model
  (``scopehub.hub.settings.Settings``): variable, type, default, description.
- The report blocks of ``benchmarks.md`` are re-rendered from ``docs/benchmarks/*.json``
  (:mod:`scopehub.eval.bench_page`); a committed page that differs from its reports is a
  warning, so ``mkdocs build --strict`` fails until ``agents-hub bench page`` is run.

The CLI reference is rendered by the mkdocs-click extension from click's own help.
``agents-hub``'s group loads most commands lazily, and mkdocs-click lists a group's
already-loaded commands when it has any, so :func:`on_config` loads them all first.
"""

from __future__ import annotations

import logging
import os
import types
import typing
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

log = logging.getLogger("mkdocs.hooks.reference")

SETTINGS_MARKER = "<!-- settings-table -->"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (list, tuple):
        return "JSON list"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return "none"
    return {str: "text", int: "integer", float: "number", bool: "true/false"}.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(metadata: list[Any]) -> str:
    words = []
    for item in metadata:
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                words.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value:g}")
    return ", ".join(words)


def _default(field: Any) -> str:
    value = field.get_default(call_default_factory=True)
    if value == "":
        return "empty"
    if isinstance(value, list | dict):
        import json

        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def settings_table() -> str:
    """A Markdown table of every setting, read from the model's fields."""
    from scopehub.hub.settings import Settings

    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        variable = field.alias or f"HUB_{name.upper()}"
        kind = _type_name(field.annotation)
        bounds = _bounds(field.metadata)
        if bounds:
            kind += f" ({bounds})"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{variable}` | {kind} | {_default(field)} | {description} |")
    return "\n".join(rows)


def on_config(config: Any) -> Any:
    """Load every lazily registered command, so the CLI reference lists them all, in name order."""
    import click

    from scopehub.hub.cli.main import cli

    def load(group: click.Group, ctx: click.Context) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                load(command, click.Context(command, parent=ctx, info_name=name))
        group.commands = dict(sorted(group.commands.items()))

    load(cli, click.Context(cli, info_name="agents-hub"))
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_table())
    if page.file.src_uri == "benchmarks.md":
        from scopehub.eval.bench_page import PageError, render_page

        try:
            rendered = render_page(markdown, Path(config["docs_dir"]) / "benchmarks")
        except PageError as exc:
            log.warning("benchmarks.md: %s", exc)
            return markdown
        if rendered != markdown:
            log.warning("benchmarks.md differs from its reports in docs/benchmarks/: run `agents-hub bench page`")
        return rendered
    return markdown
