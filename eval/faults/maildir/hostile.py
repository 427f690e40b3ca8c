"""``maildir_hostile`` and ``maildir_cross_scope``: hostile files dropped into new/, look-alike scopes."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopehub.hub.transports.maildir.files import publish, render
from scopehub.hub.transports.maildir.layout import (
    MAX_FILE_BYTES,
    dispatch_name,
    inbox_dir,
    scope_folder,
)
from scopehub.hub.transports.maildir.send import name_taken_in_scope, send_dispatch
from scopehub.memory import Store

from .._outcome import SCOPE_PAIRS, Outcome, Scenario, timed
from ._harness import (
    INBOXES,
    _answered,
    _bound,
    _count_files,
    _dlq_entries,
    _HubProcess,
    _listdir,
    _outbox_replies,
    _report_answered,
    _report_process,
    _rows,
    _running_hub,
    _stored,
    _wait,
)

# -- hostile files --------------------------------------------------------------------------------

GOOD = b"---\nfrom: cron\nsubject: fine\nreply: true\n---\n"


def _bomb(levels: int = 9, width: int = 9, key: str = "subject") -> bytes:
    """Billion laughs: 9 anchors, each 9 aliases of the one before (9**9 strings if expanded)."""
    lines = ['a0: &a0 "lol"']
    lines += [f"a{n}: &a{n} [{', '.join(f'*a{n - 1}' for _ in range(width))}]" for n in range(1, levels + 1)]
    return ("---\nfrom: cron\n" + "\n".join(lines) + f"\n{key}: *a{levels}\n---\nboom\n").encode()


@dataclass
class _Case:
    """One hostile thing under the root: where it is, what it is, what must happen to it."""

    kind: str
    expect: str  # "dlq" | "refused" | "delivered"
    path: bytes  # where it was put (bytes: names need not be UTF-8)
    scope: str | None = None  # the scope it belongs to, for "delivered"
    inode: tuple[int, int] | None = None


def _put(path: bytes, data: bytes | None = None, *, link_to: bytes | None = None, fifo: bool = False, folder: bool = False) -> tuple[int, int]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if link_to is not None:
        os.symlink(link_to, path)
    elif fifo:
        os.mkfifo(path)
    elif folder:
        os.makedirs(path)
    else:
        # the safe way even for hostile content: whole in tmp/, then one rename into new/
        tmp = os.path.join(os.path.dirname(os.path.dirname(path)), b"tmp", b"hostile." + os.urandom(4).hex().encode())
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data or b"")
        os.rename(tmp, path)
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _hostile_round(root: Path, outside: Path, r: int) -> list[_Case]:
    """Drop one round of hostile files (and the folders they need); returns what must become of each."""
    scope = f"user:{4000 + r}"
    folder = os.fsencode(scope_folder(scope))
    rootb = os.fsencode(root)
    cases: list[_Case] = []

    def drop(kind: str, expect: str, name: bytes | str, data: bytes | None = None, *, inbox: bytes = b"notes", top: bytes = folder, **how: Any) -> None:
        raw = name if isinstance(name, bytes) else name.encode()
        path = os.path.join(rootb, top, inbox, b"new", raw)
        cases.append(_Case(kind, expect, path, scope if top == folder else None, _put(path, data, **how)))

    tag = f"r{r}-"
    # contents -> dlq/
    drop("no front matter", "dlq", tag + "nofm.md", b"just a plain text file\n")
    drop("empty file", "dlq", tag + "empty.md", b"")
    drop("front matter not closed", "dlq", tag + "unclosed.md", b"---\nfrom: cron\nsubject: x\nbody without an end\n")
    drop("over 1 MiB", "dlq", tag + "huge.md", GOOD + b"a" * (MAX_FILE_BYTES + 10))
    drop("not UTF-8", "dlq", tag + "latin1.md", GOOD + "caf\xe9 cr\xe8me\n".encode("latin-1"))
    drop("NUL bytes", "dlq", tag + "nul.md", GOOD + b"x\x00y\n")
    drop("YAML bomb in a field", "dlq", tag + "bomb.md", _bomb())
    drop("YAML bomb in an unknown field", "dlq", tag + "bomb-x.md", _bomb(key="x"))
    drop("YAML anchors", "dlq", tag + "anchors.md", b"---\nfrom: &who cron\nsubject: *who\n---\nhi\n")
    drop("!!python tag", "dlq", tag + "pytag.md", f'---\nfrom: !!python/object/apply:os.system ["touch {outside}/pwned"]\n---\nx\n'.encode())
    drop("deep nesting", "dlq", tag + "deep.md", b"---\nfrom: " + b"[" * 5000 + b"]" * 5000 + b"\n---\nx\n")
    drop("front matter over 64 KiB", "dlq", tag + "bigfm.md", b"---\nfrom: cron\nsubject: " + b"s" * 70_000 + b"\n---\nx\n")
    drop("front matter a list", "dlq", tag + "list.md", b"---\n- from\n- cron\n---\nx\n")
    drop("front matter a string", "dlq", tag + "str.md", b"---\njust words\n---\nx\n")
    drop("'from' a list", "dlq", tag + "from-list.md", b"---\nfrom: [cron, ci]\n---\nx\n")
    drop("'from' a mapping", "dlq", tag + "from-map.md", b"---\nfrom: {a: 1}\n---\nx\n")
    drop("'from' missing", "dlq", tag + "from-none.md", b"---\nsubject: hi\n---\nx\n")
    drop("'from' a path", "dlq", tag + "from-path.md", b"---\nfrom: ../../../etc/cron\n---\nx\n")
    drop("'from' with a line break", "dlq", tag + "from-nl.md", b'---\nfrom: "cr\\non"\n---\nx\n')
    drop("'priority' a number", "dlq", tag + "prio-int.md", b"---\nfrom: cron\npriority: 5\n---\nx\n")
    drop("'priority' unknown", "dlq", tag + "prio-bad.md", b"---\nfrom: cron\npriority: URGENT!!\n---\nx\n")
    drop("'reply' not a flag", "dlq", tag + "reply-bad.md", b"---\nfrom: cron\nreply: maybe\n---\nx\n")
    drop("'subject' a list", "dlq", tag + "subj-list.md", b"---\nfrom: cron\nsubject: [a, b]\n---\nx\n")
    drop("invalid YAML", "dlq", tag + "badyaml.md", b"---\nfrom: cron\n  subject: : : [\n---\nx\n")
    # names and things that are not files -> dlq/
    drop("name not UTF-8", "dlq", tag.encode() + b"caf\xe9\xff.md", GOOD + b"body\n")
    drop("symlink to a valid dispatch outside", "dlq", tag + "link-secret.md", link_to=os.fsencode(outside / "secret.md"))
    drop("symlink to /etc/passwd", "dlq", tag + "link-passwd.md", link_to=b"/etc/passwd")
    drop("symlink up and out", "dlq", tag + "link-up.md", link_to=b"../../../../outside/secret.md")
    drop("dangling symlink", "dlq", tag + "link-dangling.md", link_to=os.fsencode(outside / "nothing-here"))
    drop("FIFO", "dlq", tag + "fifo.md", fifo=True)
    drop("folder", "dlq", tag + "folder.md", folder=True)
    drop("unknown agent", "dlq", tag + "agent.md", GOOD + b"body\n", inbox=b"no-such-agent")
    drop("non-canonical scope folder", "dlq", tag + "alias.md", GOOD + b"body\n", top=f"user-%34{4000 + r}".encode())
    drop("folder that is no scope", "dlq", tag + "evil.md", GOOD + b"body\n", top=b"evil..folder")
    # folders that are symlinks: never followed, never read, left in place
    target = _plant(outside, r)
    os.symlink(outside / f"scopebox-{r}", root / f"user-{5000 + r}")
    cases.append(_Case("symlinked scope folder", "refused", os.fsencode(target / "planted.md"), inode=_lstat_key(target / "planted.md")))
    newdir = outside / f"newbox-{r}"
    (root / scope_folder(scope) / "tasks").mkdir(parents=True, exist_ok=True)
    os.symlink(newdir, root / scope_folder(scope) / "tasks" / "new")
    cases.append(_Case("symlinked new/ folder", "refused", os.fsencode(newdir / "planted.md"), inode=_lstat_key(newdir / "planted.md")))
    # odd names and fields with a valid dispatch: delivered in their own scope, nothing outside touched
    valid = GOOD + b"odd but valid\n"
    drop("traversal-looking name", "delivered", tag + "..%2F..%2Fetc%2Fpasswd.md", valid)
    drop("backslash traversal name", "delivered", tag + "..\\..\\..\\evil.md", valid)
    drop("dot name", "delivered", "." + tag + "hidden.md", valid)
    drop("very long name", "delivered", tag + "x" * (251 - len(tag)) + ".md", valid)
    drop("long multibyte name", "delivered", tag + "ü" * ((251 - len(tag)) // 2) + ".md", valid)
    drop("control characters in the name", "delivered", tag + "ctl-\x1b[31m-\r-\t-\n-\x07.md", valid)
    drop("option-looking name", "delivered", "-rf " + tag + "--no-preserve-root.md", valid)
    drop("traversal in reply_to and thread", "delivered", tag + "fields.md",
         b"---\nfrom: cron\nreply: true\nreply_to: ../../../../etc/passwd\nthread: ../../outbox/x\n---\nx\n")
    drop("front matter naming another scope and agent", "delivered", tag + "lies.md",
         b"---\nfrom: cron\nreply: true\nscope: user:1\nto: ../../dlq\n---\nx\n")
    return cases


def _plant(outside: Path, r: int) -> Path:
    """The valid dispatches outside the root that round ``r``'s symlinked folders point at; their scope box's new/."""
    target = outside / f"scopebox-{r}" / "notes" / "new"
    for folder in (target, outside / f"newbox-{r}"):
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "planted.md").exists():
            (folder / "planted.md").write_bytes(GOOD + b"OUTSIDE-SECRET planted\n")
    return target


def _lstat_key(path: Path | bytes) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _tree(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (not following symlinks): its kind and the digest of its content."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(path)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                found[os.fsdecode(full)] = "link:" + os.fsdecode(os.readlink(full))
            elif os.path.isfile(full):
                found[os.fsdecode(full)] = hashlib.sha256(Path(os.fsdecode(full)).read_bytes()).hexdigest()
            elif not os.path.isdir(full):
                found[os.fsdecode(full)] = "special"
    return found


def _inodes(root: Path) -> dict[tuple[int, int], bytes]:
    """Every entry under ``root`` (not following symlinks) by inode."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            found[_lstat_key(full)] = full
    return found


def hostile_files(workdir: Path, *, rounds: int = 10, seed: int = 0, timeout: float | None = None) -> dict[str, Any]:
    """Drop ``rounds`` rounds of hostile files (and good ones between) while the hub runs; returns the counts."""
    timeout = _bound(timeout, rounds * 50)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root, outside = workdir / "hub.db", workdir / "maildir", workdir / "outside"
    Store(db).close()
    root.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.md").write_bytes(GOOD + b"OUTSIDE-SECRET: never to be read by the hub\n")
    for r in range(rounds):
        _plant(outside, r)
    outside_before = _tree(outside)
    hub = _HubProcess(workdir, db, root)
    started = time.perf_counter()
    cases: list[_Case] = []
    good: dict[tuple[str, str], Path] = {}
    with _running_hub(hub):
        hub.wait_ready()
        for r in range(rounds):
            cases.extend(_hostile_round(root, outside, r))
            scope = f"user:{4000 + r}"
            for g in range(3):  # good files between the hostile ones: they must still be answered
                path = send_dispatch(root, scope, "notes", sender="cron", body=f"good {r}.{g}", subject=f"good {r} {g}", reply=True)
                assert path is not None
                good[(scope, path.name)] = path.parent.parent
        pending = [case for case in cases if case.expect != "refused"]
        finished = _wait(lambda: not any(os.path.lexists(case.path) for case in pending), hub, timeout)
        # the good files are answered too (the last pass may still be writing them)
        _wait(lambda: all((box / "cur" / name).exists() for (_s, name), box in good.items()), hub, 60)
        alive = hub.proc is not None and hub.proc.poll() is None
        exit_status = hub.stop()
    outside_after = _tree(outside)
    everything = _inodes(root)
    everything.update(_inodes(outside))
    stored = _stored(db)
    stored_names = {name for _scope, name in stored}
    texts = " ".join(text for _mid, text in stored.values())
    counts: dict[str, Any] = {
        "cases": len(cases),
        "rounds": rounds,
        "by_expect": dict(Counter(case.expect for case in cases)),
        "lost": 0,
        "wrong_outcome": 0,
        "dlq_without_reason": 0,
        "outside_read_or_changed": 0,
        "kinds": sorted({case.kind for case in cases}),
        "problems": [],
    }

    def problem(count: str, case: _Case, text: str) -> None:
        counts[count] += 1
        counts["problems"].append(f"{case.kind} ({os.fsdecode(os.path.basename(case.path))!r}): {text}")

    dlq_root = os.fsencode(root / "dlq")
    for case in cases:
        where = everything.get(case.inode) if case.inode else None
        name = os.fsdecode(os.path.basename(case.path))
        if where is None:
            problem("lost", case, "not found anywhere (deleted)")
            continue
        if case.expect == "dlq":
            if not where.startswith(dlq_root + b"/"):
                problem("wrong_outcome", case, f"expected in dlq/, found at {os.fsdecode(where)!r}")
            elif not os.path.exists(where + b".reason") or not Path(os.fsdecode(where + b".reason")).read_text().strip():
                problem("dlq_without_reason", case, "no reason beside it in dlq/")
            if name in stored_names:
                problem("wrong_outcome", case, "stored as a message although it went to dlq/")
        elif case.expect == "refused":
            if where != case.path:
                problem("wrong_outcome", case, f"moved to {os.fsdecode(where)!r}; a symlinked folder must not be touched")
        else:
            if os.path.basename(os.path.dirname(where)) != b"cur" or (case.scope, name) not in stored:
                problem("wrong_outcome", case, f"expected delivered in {case.scope}, found at {os.fsdecode(where)!r}")
    if "OUTSIDE-SECRET" in texts:
        counts["outside_read_or_changed"] += texts.count("OUTSIDE-SECRET")
        counts["problems"].append("a file outside the root (through a symlink) was stored as a message")
    if outside_before != outside_after or (outside / "pwned").exists():
        counts["outside_read_or_changed"] += 1
        counts["problems"].append("something outside the root changed")
    good_answered, _ = _answered(db, root, good)
    counts.update(
        finished=finished,
        alive_to_the_end=alive,
        exit_status=exit_status,
        hub_died=hub.died,
        failed_passes=hub.failed_passes(),
        good=len(good),
        answered=good_answered,
        dlq_entries=_dlq_entries(root),
        seconds=round(time.perf_counter() - started, 1),
    )
    return counts


def maildir_hostile(workdir: Path, *, rounds: int = 10, seed: int = 0) -> Outcome:
    """Hostile names and contents: each to dlq/ with a reason or refused; nothing deleted; the hub never crashes."""

    out = Outcome("maildir_hostile")
    with timed(out):
        counts = hostile_files(workdir, rounds=rounds, seed=seed)
    _report_answered(out, counts["answered"])
    _report_process(out, counts)
    if not counts["alive_to_the_end"]:
        out.fail("crashed", "the hub process was not running at the end")
    if counts["lost"]:
        out.fail("lost", "hostile files deleted (not found by inode anywhere)", counts["lost"])
    if counts["wrong_outcome"]:
        out.fail("crashed", "hostile files without their promised outcome", counts["wrong_outcome"])
    if counts["dlq_without_reason"]:
        out.fail("crashed", "dlq/ entries without a reason", counts["dlq_without_reason"])
    if counts["outside_read_or_changed"]:
        out.fail("leaked", "files outside the root read or changed", counts["outside_read_or_changed"])
    for text in counts["problems"]:
        out.note(text)
    if out.ok:
        out.verify("hostile files with their promised outcome", counts["cases"])
        out.verify("good files between them answered once", counts["good"])
    by = counts["by_expect"]
    out.note(
        f"{counts['rounds']} rounds x {len(counts['kinds'])} kinds = {counts['cases']} hostile files: "
        f"{by.get('dlq', 0)} to dlq/ with a reason, {by.get('refused', 0)} refused (symlinked folders, left in place), "
        f"{by.get('delivered', 0)} odd names or fields delivered in their own scope; lost {counts['lost']}, "
        f"hub crashes {counts['hub_died'] + counts['failed_passes'] + (not counts['alive_to_the_end'])}, "
        f"outside the root read or changed {counts['outside_read_or_changed']}"
    )
    out.details = counts
    return out


# -- cross-scope ----------------------------------------------------------------------------------


def _cross_scopes(n: int) -> list[str]:
    """Look-alike scopes first (same id as user and group, signs, prefixes), then more."""
    looks = ["user:42", "group:42", "group:-42", "user:4", "user:420", "group:-100", "group:100", "user:1", "user:11"]
    extra = [f"user:{9000 + i}" if i % 2 else f"group:-{9000 + i}" for i in range(max(0, n - len(looks)))]
    return (looks + extra)[:n]


def _secret(scope: str) -> str:
    return "SECRET" + hashlib.sha256(scope.encode()).hexdigest()[:12].upper()


def cross_scope(workdir: Path, *, scopes: int = 50, per_scope: int = 10, seed: int = 0, timeout: float | None = None) -> dict[str, Any]:
    """Files for many look-alike scopes, some lying about their scope, plus alias folders; returns the counts."""
    timeout = _bound(timeout, scopes * per_scope)
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root, prompts = workdir / "hub.db", workdir / "maildir", workdir / "prompts.jsonl"
    Store(db).close()
    names = _cross_scopes(scopes)
    secrets_of = {scope: _secret(scope) for scope in names}
    owner = {secret: scope for scope, secret in secrets_of.items()}
    expected: dict[tuple[str, str], Path] = {}
    base = time.time() - 3600
    lies = 0
    for i in range(per_scope):
        for scope in names:
            other = rng.choice([s for s in names if s != scope]) if len(names) > 1 else scope
            lie = i % 3 == 1
            lies += lie
            inbox = INBOXES[i % len(INBOXES)]
            body = f"{secrets_of[scope]} item {i} of this scope only"
            if lie:  # front matter naming another scope and another agent: the folder decides
                meta = {"from": "cron", "to": "tasks", "scope": other, "subject": f"item {i}", "reply": True}
                path = publish(inbox_dir(root, scope, inbox), dispatch_name(base + i, "normal", "cron", f"item {i}"),
                               render(meta, body).encode(), taken=lambda n, scope=scope: name_taken_in_scope(root, scope, n))
            else:  # the same name in every scope: keyed per scope, never a duplicate of another's
                path = send_dispatch(root, scope, inbox, sender="cron", body=body, subject=f"item {i}", reply=True, created=base + i)
            assert path is not None
            expected[(scope, path.name)] = path.parent.parent
    # alias folders: another spelling of a scope (dlq), a symlink to another scope's folder (not followed)
    victim = names[0]
    alias = f"user-%3{victim.split(':')[1][0]}{victim.split(':')[1][1:]}" if victim.startswith("user:") else "user-%342"
    (root / alias / "notes" / "new").mkdir(parents=True, exist_ok=True)
    (root / alias / "notes" / "new" / "alias.md").write_bytes(render({"from": "cron"}, "ALIAS-SPELLING must not reach any scope").encode())
    spare = root / "user-777777"
    os.symlink(root / scope_folder(victim), spare)
    hub = _HubProcess(workdir, db, root, prompts=prompts)
    started = time.perf_counter()
    boxes = sorted(set(expected.values()))
    with _running_hub(hub):
        finished = _wait(lambda: _count_files(boxes, "new") == 0 and not (root / alias / "notes" / "new" / "alias.md").exists(), hub, timeout)
        exit_status = hub.stop()
    answered, _texts = _answered(db, root, expected)
    leaks: Counter[str] = Counter()
    stored = _stored(db)
    pattern = re.compile(r"SECRET[0-9A-F]{12}")
    for (scope, _name), (_mid, text) in stored.items():
        leaks["message"] += sum(1 for s in pattern.findall(text) if owner.get(s) != scope)
        leaks["alias"] += "ALIAS-SPELLING" in text
    for scope, text in _rows(db, "SELECT scope, text FROM messages WHERE role = 'agent'"):
        leaks["reply stored"] += sum(1 for s in pattern.findall(text) if owner.get(s) != scope)
    for reply in _outbox_replies(root):
        scope = reply.get("scope")
        leaks["reply file"] += sum(1 for s in pattern.findall(reply["body"]) if owner.get(s) != scope)
        leaks["reply file"] += (scope, reply.get("reply_to")) not in expected
    calls = 0
    for line in prompts.read_text().splitlines() if prompts.exists() else []:
        calls += 1
        found = {owner.get(s) for s in pattern.findall(" ".join(json.loads(line)))}
        leaks["prompt"] += len(found) > 1
        leaks["alias"] += "ALIAS-SPELLING" in line
    for folder in _listdir(root / "receipts"):
        for inbox in _listdir(root / "receipts" / folder):
            for name in _listdir(root / "receipts" / folder / inbox):
                receipt = json.loads((root / "receipts" / folder / inbox / name).read_text())
                if receipt["outcome"] == "drained" and scope_folder(receipt["scope"]) != folder:
                    leaks["receipt"] += 1
    return {
        "scopes": len(names),
        "files": len(expected),
        "lying_front_matter": lies,
        "same_name_in_every_scope": per_scope - sum(1 for i in range(per_scope) if i % 3 == 1),
        "prompts_checked": calls,
        "alias_in_dlq": _dlq_entries(root),
        "alias_symlink_untouched": os.path.islink(spare),
        "leaks": dict(leaks),
        "leaked": sum(leaks.values()),
        "finished": finished,
        "exit_status": exit_status,
        "hub_died": hub.died,
        "failed_passes": hub.failed_passes(),
        "answered": answered,
        "seconds": round(time.perf_counter() - started, 1),
    }


def maildir_cross_scope(workdir: Path, *, scopes: int = 50, per_scope: int = 10, seed: int = 0) -> Outcome:
    """A file for another scope never reaches this one: messages, prompts, replies, receipts."""

    out = Outcome("maildir_cross_scope")
    with timed(out):
        counts = cross_scope(workdir, scopes=scopes, per_scope=per_scope, seed=seed)
    _report_answered(out, counts["answered"])
    _report_process(out, {**counts, "dlq": 0})
    if counts["leaked"]:
        out.fail("leaked", f"another scope's secret reached a scope: {counts['leaks']}", counts["leaked"])
    if counts["alias_in_dlq"] != 1:
        out.fail("leaked", f"the alias folder's file was not sent to dlq/ ({counts['alias_in_dlq']} dlq entries)")
    if not counts["alias_symlink_untouched"]:
        out.fail("crashed", "the symlinked scope folder was changed")
    if out.ok:
        out.verify("files delivered only in their own scope", counts["files"])
        out.verify(SCOPE_PAIRS, counts["scopes"] * (counts["scopes"] - 1))
        out.verify("model prompts with one scope's secrets only", counts["prompts_checked"])
    out.note(
        f"{counts['scopes']} look-alike scopes x {per_scope} files ({counts['lying_front_matter']} naming another scope "
        f"and agent in their front matter; the same names in every scope), an alias spelling (to dlq/) and a symlinked "
        f"scope folder (not followed); {counts['prompts_checked']:,} model prompts checked; leaks {counts['leaked']}"
    )
    out.details = counts
    return out


SCENARIOS = {
    "maildir_hostile": Scenario(maildir_hostile, heavy={"rounds": 10}, quick={"rounds": 1}),
    "maildir_cross_scope": Scenario(maildir_cross_scope, heavy={"scopes": 50, "per_scope": 10}, quick={"scopes": 9, "per_scope": 3}),
}
