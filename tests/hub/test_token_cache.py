"""Token counts cached per text and the BPE table kept on disk: the same counts and cuts as
tiktoken's own, every time, bounded memory, and a broken cache file is only a rebuild."""

from __future__ import annotations

import tiktoken

from scopehub.hub.context import tokens
from scopehub.hub.context.tokens import TiktokenTokenizer, _CountCache

TEXTS = [
    "",
    "add buy milk to my tasks",
    "Напомни мне позвонить врачу в понедельник 🎉",
    "<|endoftext|> is counted as plain text",
    "word " * 3000,
    "x" * 60_000,  # longer than the cache keeps: counted every time, still right
]


def test_counts_and_cuts_are_tiktokens_whether_cached_or_not(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    first = TiktokenTokenizer()  # parses the table and keeps it on disk (and points tiktoken offline)
    reference = tiktoken.get_encoding("o200k_base")
    second = TiktokenTokenizer()  # reads it back
    assert list((tmp_path / "cache").glob("tiktoken-*.bin"))
    for tokenizer in (first, second):
        for _ in range(2):  # the second round is served from the cache
            for text in TEXTS:
                expected = len(reference.encode(text, disallowed_special=())) if text else 0
                assert tokenizer.count(text) == expected
                for limit in (1, 5, 100, 10_000):
                    encoded = reference.encode(text, disallowed_special=())
                    want = text if len(encoded) <= limit else reference.decode(encoded[:limit])
                    assert tokenizer.truncate(text, limit) == want
            assert tokenizer.truncate("anything", 0) == ""


def test_the_count_cache_keeps_at_most_its_characters_newest_first():
    cache = _CountCache(max_chars=100, max_text=40)
    for i in range(20):
        cache.put(f"text number {i:02d}", i)  # 14 characters each
    assert cache.get("text number 19") == 19 and cache.get("text number 00") is None
    assert sum(len(t) for t in cache._counts) <= 100
    cache.put("y" * 41, 1)
    assert cache.get("y" * 41) is None  # too long to keep


def test_a_cache_file_cut_short_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    TiktokenTokenizer()
    (kept,) = (tmp_path / "cache").glob("tiktoken-*.bin")
    kept.write_bytes(kept.read_bytes()[:1000])
    again = TiktokenTokenizer()
    assert kept.stat().st_size > 1000  # written whole again
    assert again.count("add buy milk to my tasks") == len(tiktoken.get_encoding("o200k_base").encode("add buy milk to my tasks"))
    assert tokens.get_tokenizer() is tokens.get_tokenizer()
