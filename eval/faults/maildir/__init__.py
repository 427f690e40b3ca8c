"""Maildir faults (issue 17): the real intake in a hub process, attacked from outside.

Every scenario runs the hub as a child process the way ``agents-hub dispatch run`` does
(``bridge.start_watcher`` over the root: inotify, polling as the fallback), with the fast
echo model, and writes files the way outside programs do. Then it counts, per file name:

``maildir_kill``
    ``files`` dispatches (each asking for a reply) wait in the inboxes of ``scopes`` scopes;
    the hub is SIGKILLed ``kills`` times while it ingests them, at random points of its
    progress (every other kill aimed at the moment a file is committed but not yet moved
    to ``cur/``), and restarted each time. Every file must be answered exactly once:
    counted are files answered 0 times and more than once, in the database (the agent's
    reply to the file's message) and in the sender's outbox (the reply file).
``maildir_writers``
    ``writers`` writer processes deliver ``per_writer`` files each while the hub ingests,
    all under the same origin and subjects (so their names collide), every
    ``cli_every``-th one through ``agents-hub dispatch send``: every acknowledged file
    is stored once, whole, and answered once.
``maildir_half_written``
    slow writers stream large files into ``tmp/`` in chunks with pauses while the hub
    ingests, and ``crashers`` writers are SIGKILLed in the middle of a file: the hub never
    reads a partial file (a stored body whose digest is wrong, or a dlq entry), and never
    ingests a crashed writer's ``tmp/`` file. Those stay in ``tmp/``, counted: the hub
    deletes nothing, and never looks at ``tmp/``.
``maildir_hostile``
    ``rounds`` rounds of hostile files dropped straight into ``new/`` (bypassing the
    writer): path traversal and very long names, control characters, names that are not
    UTF-8, no front matter, over 1 MiB, NUL bytes, YAML bombs and anchors, ``!!python``
    tags, front matter of the wrong types, symlinks in ``new/`` pointing outside, FIFOs,
    folders, unknown agents and scope folders, symlinked scope and ``new/`` folders. Each
    goes to ``dlq/`` with a reason, or is refused (left where it is, never read), or (odd
    names with a valid body) is delivered in its own scope; nothing is lost (every file
    is found again by its inode), nothing outside the root is read or changed, the hub
    never crashes and keeps delivering the good files between them.
``maildir_cross_scope``
    ``scopes`` scopes (look-alike ids: ``user:42``/``group:42``, ``group:-100``/``group:100``)
    each get ``per_scope`` files with the scope's own secret, under the same names in
    every scope, some with front matter that names another scope or agent, plus alias
    folders (a non-canonical spelling, a symlink to another scope's folder): no
    message, prompt sent to the model, reply file or receipt of one scope carries
    another's secret, and every file is delivered in its own scope.
``maildir_two_intakes``
    two hub processes watch one Maildir on one database (SQLite and PostgreSQL), on a
    backlog and on files written while they run: every file stored, answered and
    replied to once and moved to ``cur/``, and no false ``dlq/`` entry (a reason left for
    a file the other intake delivered).
"""

from .hostile import SCENARIOS as _HOSTILE
from .hostile import cross_scope, hostile_files, maildir_cross_scope, maildir_hostile
from .intakes import SCENARIOS as _INTAKES
from .intakes import maildir_two_intakes
from .kills import SCENARIOS as _KILLS
from .kills import kill_ingest, maildir_kill
from .writers import SCENARIOS as _WRITERS
from .writers import concurrent_writers, half_written, maildir_half_written, maildir_writers

__all__ = [
    "SCENARIOS",
    "concurrent_writers",
    "cross_scope",
    "half_written",
    "hostile_files",
    "kill_ingest",
    "maildir_cross_scope",
    "maildir_half_written",
    "maildir_hostile",
    "maildir_kill",
    "maildir_two_intakes",
    "maildir_writers",
]

SCENARIOS = {**_KILLS, **_WRITERS, **_HOSTILE, **_INTAKES}
