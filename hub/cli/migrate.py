"""``agents-hub migrate --from sqlite:///old.db --to postgresql://...``: move a database."""

from __future__ import annotations

import click

from scopehub.memory import StoreError, open_store, store_location


def _normal(url: str) -> tuple[str, str]:
    backend, location = store_location(url)
    if backend == "postgres":
        return "postgresql", location.replace("postgres://", "postgresql://", 1)
    return backend, location


@click.command("migrate")
@click.option("--from", "source", required=True, metavar="URL", help="the database to copy: sqlite:///path (or a file path) or postgresql://...")
@click.option("--to", "target", required=True, metavar="URL", help="the PostgreSQL database to copy into: postgresql://user:password@host/dbname")
@click.option("--batch", type=click.IntRange(min=1), default=5000, show_default=True, help="rows per committed batch")
def migrate_command(source: str, target: str, batch: int) -> None:
    """Copy every table of a database into PostgreSQL, resumably, and verify the counts.

    Ids are kept and sequences moved past them. Each batch commits with its progress on
    the target, so after a crash or Ctrl-C the same command continues where it stopped,
    without duplicates. Stop the hub first: rows written meanwhile are not copied.
    """
    if store_location(target)[0] not in ("postgresql", "postgres"):
        raise click.UsageError(f"--to must be a postgresql:// URL, not {target!r}")
    if store_location(source)[0] not in ("sqlite", "postgresql", "postgres"):
        raise click.UsageError(f"--from must be a sqlite:/// or postgresql:// URL (or a SQLite file path), not {source!r}")
    if _normal(source) == _normal(target):
        raise click.UsageError("--from and --to name the same database")
    try:
        from_store = open_store(source, must_exist=True)
    except StoreError as exc:
        raise click.ClickException(f"--from: {exc}") from exc
    try:
        try:
            to_store = open_store(target)
        except StoreError as exc:
            raise click.ClickException(f"--to: {exc}") from exc
        from scopehub.memory.postgres import redact_url
        from scopehub.memory.postgres.copy import copy_store

        def progress(table: str, rows: int) -> None:
            click.echo(f"  {table}: +{rows} rows", err=True)

        try:
            report = copy_store(from_store, to_store, source_name=redact_url(source), batch_size=batch, on_batch=progress)
        except StoreError as exc:
            raise click.ClickException(str(exc)) from exc
        finally:
            to_store.close()
    finally:
        from_store.close()
    width = max(len(count.table) for count in report.counts)
    click.echo(f"{'table':<{width}}  {'source':>9}  {'target':>9}  copied now")
    for count in report.counts:
        mark = "" if count.ok else "  MISMATCH"
        click.echo(f"{count.table:<{width}}  {count.source:>9}  {count.target:>9}  {report.copied.get(count.table, 0):>10}{mark}")
    if not report.ok:
        bad = ", ".join(count.table for count in report.counts if not count.ok)
        raise click.ClickException(
            f"counts differ in {bad}: was the hub still writing to the source? Stop it and run the same command again"
        )
    click.echo(f"done: {sum(c.target for c in report.counts)} rows in {len(report.counts)} tables, counts verified")
