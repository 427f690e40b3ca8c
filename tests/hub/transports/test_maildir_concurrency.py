"""Five writer processes stream large files slowly while the intake drains: each seen once, whole."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import tempfile
from pathlib import Path

import pytest

from scopehub.hub.transports.maildir import Dispatch, MaildirIntake, dlq_count
from tests.hub.transports.helpers import AGENTS, slow_writer, writer_payload

WRITERS, FILES, SIZE = 5, 200, 24_000


@pytest.fixture
def root(tmp_path: Path):
    """On tmpfs when there is one: the property is about visibility, not the disk, and fsync there is free."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="maildir-test-") as folder:
            yield Path(folder) / "maildir"
    else:
        yield tmp_path / "maildir"


def test_concurrent_writers_every_file_exactly_once_never_partial(root: Path) -> None:
    seen: dict[str, int] = {}
    broken: list[str] = []

    async def deliver(dispatch: Dispatch) -> None:
        seen[dispatch.ext_id] = seen.get(dispatch.ext_id, 0) + 1
        digest, _, payload = dispatch.body.partition("\n")
        writer, index = int(dispatch.sender[1:]), int(dispatch.subject.split()[-1])
        if payload != writer_payload(writer, index, SIZE) or hashlib.sha256(payload.encode()).hexdigest() != digest:
            broken.append(dispatch.name)

    intake = MaildirIntake(root, agents=AGENTS, deliver=deliver, rate_per_scope=None)
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=slow_writer, args=(str(root), k, FILES, SIZE)) for k in range(WRITERS)]
    for writer in writers:
        writer.start()

    async def drain_while_writing() -> int:
        passes = 0
        while any(writer.is_alive() for writer in writers):
            await intake.drain_once()
            passes += 1
            await asyncio.sleep(0.01)
        await intake.drain_once()
        return passes

    passes = asyncio.run(drain_while_writing())
    for writer in writers:
        writer.join(30)
        assert writer.exitcode == 0

    assert passes > 5  # the intake really ran while files were being written
    assert broken == [] and dlq_count(root) == 0
    assert len(seen) == WRITERS * FILES
    assert set(seen.values()) == {1}
    assert not list(root.glob("*/*/new/*")) and not list(root.glob("*/*/tmp/*"))
    assert len(list(root.glob("*/*/cur/*"))) == WRITERS * FILES
