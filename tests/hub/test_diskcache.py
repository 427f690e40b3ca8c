"""The start-up cache keeps a few versions of each prepared file, not one per upgrade forever."""

from __future__ import annotations

import os
import time

from scopehub.hub import diskcache


def test_only_the_most_recently_used_versions_of_a_file_are_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path))
    written_at = time.time() - 1000  # each version written a second after the one before

    def write(version: int) -> None:
        before = set(tmp_path.glob("graph-*.bin"))
        diskcache.save_bytes("graph", [f"v{version}"], f"graph {version}".encode())
        (new,) = set(tmp_path.glob("graph-*.bin")) - before
        os.utime(new, (written_at + version, written_at + version))

    for version in range(3):
        write(version)
    diskcache.save_bytes("tokenizer", ["v0"], b"another name: not counted with the graphs")
    assert diskcache.load_bytes("graph", ["v0"]) == b"graph 0"  # the oldest, but used at this start
    for version in range(3, 8):
        write(version)
    kept = [version for version in range(8) if diskcache.load_bytes("graph", [f"v{version}"]) is not None]
    assert kept == [0, 5, 6, 7]  # the one in use and the newest, KEPT_PER_NAME in all
    assert diskcache.load_bytes("tokenizer", ["v0"]) is not None
