"""Sizes others choose, bounded: a config key of thousands of dotted parts, `controls` options worth a day of
generation or more, trap registries of huge texts or many documents, a linked folder in the cache, long documents
(memory per character), forward passes larger than the memory, and books whose headings would take minutes to
find. Each ends within seconds, in bounded memory, as a one-line error or a bounded run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import within
from test_cli import assert_clean_error, run

from docaudit.errors import BAD_INPUT, USAGE, DocauditError

REPO = Path(__file__).resolve().parents[1]
HANG_GUARD = 30  # seconds: a guard that turns a hang into a failure


def test_a_config_key_of_many_dotted_parts_is_refused_before_parsing(tmp_path):
    """tomllib's time and memory grow with the square of a dotted key's parts (100,000 parts took 19 GB)."""
    from docaudit.cli.config_file import ConfigError, read_config_file

    config = tmp_path / "settings.toml"
    config.write_text("a" + ".a" * 2000 + " = 1\n")
    with pytest.raises(ConfigError, match="more than 32 dotted parts"):
        within(HANG_GUARD, read_config_file, config)
    result = within(HANG_GUARD, run, "config", "show", "score", "--config", config)
    assert result.exit_code == USAGE
    assert_clean_error(result, "dotted parts")
    (tmp_path / "ok.toml").write_text("[score]\ncontext = 64\n")
    assert read_config_file(tmp_path / "ok.toml") == {"score": {"context": 64}}


@pytest.mark.parametrize(
    "options, message",
    [
        (["--samples", "2000000000"], "--samples 2000000000 is out of range"),
        (["--temperature", "1e308"], "--temperature 1e+308 is out of range"),
        (["--temperature", "nan"], "--temperature nan is out of range"),
        (["--passages", "100000", "--samples", "10000"], "generated tokens per book"),
        (["--context-tokens", "60000", "--prefix-tokens", "6000"], "a passage may hold"),
    ],
)
def test_controls_sizes_are_bounded_before_any_work(doc, options, message):
    result = within(HANG_GUARD, run, "controls", doc, "--dry-run", *options)
    assert result.exit_code == BAD_INPUT, result.output
    assert_clean_error(result, message)


def registry(path: Path, documents: list[dict]) -> Path:
    from docaudit.corpus.traps import REGISTRY_FORMAT

    path.write_text(json.dumps({"format": REGISTRY_FORMAT, "documents": documents}))
    return path


def trapped(doc_id: str, trap: str = "a trap", n: int = 1) -> dict:
    return {"id": doc_id, "traps": [{"text": trap}] * n, "controls": [{"text": "a control"}] * n}


@pytest.mark.parametrize(
    "documents, message",
    [
        ([trapped("a", "word " * 60_000)], "characters \\(at most 262,144\\)"),
        ([trapped(f"d{i}") for i in range(10_001)], "10,001 documents \\(at most 10,000\\)"),
        ([trapped(f"d{i}", n=5_000) for i in range(11)], "more than 100,000 traps and controls"),
    ],
    ids=["a 300 KB trap", "10,001 documents", "110,000 sequences"],
)
def test_a_registry_beyond_its_bounds_is_refused_at_once(tmp_path, documents, message):
    """A 50 MB trap took 10 GB and minutes in ``traps detect``, 20,000 documents ran past two minutes."""
    from docaudit.corpus.traps import read_registry

    with pytest.raises(DocauditError, match=message):
        within(HANG_GUARD, read_registry, registry(tmp_path / "registry.json", documents))


def test_cache_clear_never_deletes_through_a_linked_folder(tmp_path):
    """``cache info`` lists what ``cache clear`` leaves, and ``cache clear`` leaves exactly that."""
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    outside.mkdir()
    name = "ab" + "0" * 62 + ".npz"
    (outside / name).write_bytes(b"a user's file")
    (cache / "stats").mkdir(parents=True)
    (cache / "stats" / "ab").symlink_to(outside, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCAUDIT_CACHE", str(cache))
        info = run("cache", "info", "--format", "json")
        assert info.exit_code == 0, info.output
        other = json.loads(info.stdout)["other"]
        assert other["paths"] == ["stats/ab"], other
        cleared = run("cache", "clear", "--yes")
        assert cleared.exit_code == 0, cleared.output
    assert (outside / name).read_bytes() == b"a user's file"
    assert (cache / "stats" / "ab").is_symlink()


MEMORY_PROBE = textwrap.dedent(
    """
    import sys
    from docaudit.lab.tokenizer import train_tokenizer
    from docaudit.query import querier

    if hasattr(querier, "encode_long"):  # small pieces, so that a short text shows the memory per character
        from docaudit.query import tokens

        tokens.PIECE_CHARS = 1 << 15

    def peak():
        return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024

    book = open(sys.argv[1]).read()
    tokenizer = train_tokenizer([book[:50_000]], 512, special="<s>", pad=False)
    text = (book * (600_000 // len(book) + 1))[:600_000]
    before = peak()
    ids = querier.excerpt(tokenizer, text, None, "leading", 0, "0" * 64).ids
    print((peak() - before) / len(text))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak memory from /proc")
def test_a_long_document_is_tokenized_in_bounded_memory_per_character(doc):
    """A fast tokenizer holds about 220 bytes per character of a text it encodes at once (a 30 MB book took 6 GB
    in ``score`` and ``map``); in pieces, a 600 KB text takes a few tens of bytes per character."""
    from conftest import CORPUS

    book = sorted((CORPUS / "members").glob("*.txt"))[0]
    probe = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(book)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert probe.returncode == 0, probe.stderr
    assert float(probe.stdout) < 80, f"{float(probe.stdout):.0f} bytes per character"


@pytest.mark.parametrize("pieces", [(4000, 1024), (20_000, 4096)])
def test_tokenizing_in_pieces_gives_the_tokens_of_the_whole_text(tokenizer, monkeypatch, pieces):
    from conftest import corpus_ids, corpus_text

    from docaudit.query import tokens

    monkeypatch.setattr(tokens, "PIECE_CHARS", pieces[0])
    monkeypatch.setattr(tokens, "OVERLAP_CHARS", pieces[1])
    text = "".join(corpus_text("members", b, n_chars=30_000) for b in corpus_ids("members", 3))
    odd = "a" * 20_000 + " x" * 3000 + "\u00e9\u4e2d\n\n" * 5000 + "\t  \r\n" * 2000
    for one in (text, odd):
        whole = tokenizer(one, add_special_tokens=False)["input_ids"]
        assert np.array_equal(tokens.token_ids(tokenizer, one), whole)
        ids, offsets = tokens.encode_long(tokenizer, one)
        assert np.array_equal(ids, whole) and len(offsets) == len(whole)


def test_a_forward_pass_too_large_for_the_memory_is_refused_and_the_default_shrinks(gpt2, monkeypatch):
    """``--batch-size 65536 --stride 1`` reached 6.2 GB; with 10 MB available it is refused before any pass, and
    the default batch fits what is available rather than taking the memory."""
    from docaudit.config import QueryConfig
    from docaudit.query.backends import open_backend, transformers
    from docaudit.query.querier import Querier

    monkeypatch.setattr(transformers, "available_memory", lambda device: 10 << 20)
    text = "It was the best of times, it was the worst of times. " * 6
    big = Querier(gpt2, QueryConfig(context=32, stride=1, batch_size=65536), None)
    with pytest.raises(DocauditError, match="forward pass of 65,536 windows of 32 tokens.*at most [0-9,]+ windows fit"):
        within(HANG_GUARD, big.stats, text)
    small = Querier(gpt2, QueryConfig(context=32, stride=1), None)
    backend = open_backend(gpt2, QueryConfig(context=32, stride=1))
    assert 1 <= backend.batch_size(32) <= backend.fitting_windows(32) < transformers.TOKENS_PER_BATCH["cpu"] // 32
    assert within(HANG_GUARD, small.stats, text).n_scored > 0


@pytest.mark.parametrize(
    "text",
    [
        "CHAPTER " + "I" * 2_000_000 + "\n" + "word " * 500,
        "I.\n" * 300_000,
        " " * 2_000_000 + "XIV.\n" + "word " * 500,
    ],
    ids=["a 2 MB heading line", "300,000 roman numeral lines", "a 2 MB indent"],
)
def test_a_books_headings_are_found_in_bounded_time(text):
    """A 10 MB heading line, or 6 MB of roman-numeral lines, ran past two minutes in ``map``."""
    from docaudit.corpus.segments import MAX_HEADINGS, split_segments

    try:
        segments, _ = within(10, split_segments, text, 2000, 300)
    except DocauditError as e:
        assert f"more than {MAX_HEADINGS:,} lines that read as chapter headings" in str(e)
    else:
        assert 1 <= len(segments) <= 1000
