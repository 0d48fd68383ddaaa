"""`probe` within bounds on what others give: a paraphrase file refused by size and shape before it is held whole
(one line naming the file and its limit), and a long text's passages found in memory of the passages, not of the
text's words (`--passages 2 --samples 1` on a 210 MB text took 4.7 GB)."""

from __future__ import annotations

import re
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
from test_cli import assert_clean_error, run

from docaudit.audit import probes
from docaudit.config import PARAPHRASE_LINE_BYTES, PARAPHRASE_MAX_LINES, READ_LIMITS, ProbeConfig
from docaudit.corpus.segments import stretch_starts
from docaudit.errors import BAD_INPUT, DocauditError
from docaudit.seeds import stream

SERVER = ("--api-base", "http://127.0.0.1:9/v1")  # nothing listens: a refusal must come before any request


def paraphrase_lines(n: int) -> str:
    return "".join(f'{{"passage": "a{i} b", "paraphrases": ["c", "d", "e"]}}\n' for i in range(n))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: paraphrase_lines(800_000), f"over the {READ_LIMITS['paraphrases']:,} a paraphrases may hold"),
        (lambda: paraphrase_lines(PARAPHRASE_MAX_LINES + 1), f"more than {PARAPHRASE_MAX_LINES:,} lines"),
        (
            lambda: paraphrase_lines(3) + "x" * (PARAPHRASE_LINE_BYTES + 1),
            f"line 4: more than {PARAPHRASE_LINE_BYTES:,}",
        ),
    ],
    ids=["over the size limit", "too many lines", "a line too long"],
)
def test_a_paraphrase_file_past_its_bounds_is_refused_naming_it(tmp_path, doc, make, message):
    """A 256 MB file of short lines took over 4 GB, then ended "the null library gave 0 usable texts"."""
    path = tmp_path / "paraphrases.jsonl"
    path.write_text(make())
    result = run("probe", doc, "--probe", "decop", "--paraphrases", path, *SERVER)
    assert result.exit_code == BAD_INPUT, result.output
    assert_clean_error(result, message)
    assert str(path) in result.stderr


def test_a_paraphrase_file_at_its_line_bound_is_read(tmp_path):
    path = tmp_path / "paraphrases.jsonl"
    path.write_text(paraphrase_lines(PARAPHRASE_MAX_LINES))
    read = probes.read_paraphrases(path)
    assert len(read) == PARAPHRASE_MAX_LINES and read["a7 b"] == ["c", "d", "e"]


def reference_windows(text: str, length: int, config: ProbeConfig, rng) -> list:
    """The list of every word's offsets, as windows were found before (the independent reference)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    out = []
    for s in stretch_starts(len(spans), length, config.stretch_words, config.passages, rng):
        run_ = spans[s : s + length]
        out.append((s, [a for a, _ in run_] + [run_[-1][1]]))
    return out


def test_windows_are_those_of_every_word_listed():
    rng = np.random.default_rng(0)
    words = ["a", "bb", "ccc\u00e9", "--", "\u4e2d\u6587"]
    spaces = [" ", "  ", "\n", "\t\n ", "\u2003", "\x1c"]
    for trial in range(200):
        n = int(rng.integers(0, 300))
        text = "".join(rng.choice(words) + rng.choice(spaces) for _ in range(n))
        text = rng.choice(["", " ", "\n"]) + text
        length, count = int(rng.integers(1, 40)), int(rng.integers(1, 12))
        config = SimpleNamespace(passages=count, stretch_words=length + int(rng.integers(0, 30)))  # what windows reads
        got = probes.windows(text, length, config, np.random.default_rng(trial))
        assert got == reference_windows(text, length, config, np.random.default_rng(trial))


def test_normalized_is_the_words_joined_by_one_space(monkeypatch):
    monkeypatch.setattr(probes, "NORMALIZE_PIECE", 3)  # pieces cut inside words and whitespace runs alike
    rng = np.random.default_rng(1)
    pieces = ["word", "\u00e9t\u00e9", " ", "\n\n", "\t", "\u00a0", "\u2028", "\x1f", "\x85", "\u3000", "."]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(int(rng.integers(0, 40))))
        assert probes._normalized(text) == " ".join(text.split())


def peak_bytes(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_texts_passages_take_memory_of_the_passages_not_of_its_words():
    """Listing every word's offsets held about 20 bytes per character (the 4.7 GB of a 210 MB text); the text's
    words split into a list for DE-COP's search, about 13 more; now the text is copied once, spacing made one."""
    text = "the quick brown fox jumps over the lazy dog; " * 40_000  # 1.8 MB, 360,000 words
    sha = "0" * 64
    config = ProbeConfig(passages=2, samples=1)
    ngram = peak_bytes(probes.ngram_passages, text, sha, config, 0)
    assert ngram < 64_000, ngram  # two passages of 100 words: far below one byte per character
    rng = stream(0, "probe_passages", 0)
    assert peak_bytes(reference_windows, text, 100, config, rng) > 10 * len(text)  # the check can fail
    decop = ProbeConfig(probe="decop", passages=2)
    passage = " ".join(text.split()[1000:1064])
    sources = {"file": {passage: ["x y", "y z", "z x"]}}
    found = probes.decop_passages(text, sha, decop, sources, 0)
    assert [p for p, _ in found] == [passage]
    assert peak_bytes(probes.decop_passages, text, sha, decop, sources, 0) < 2.5 * len(text)  # the text once more
    assert peak_bytes(lambda t: " ".join(t.split()), text) > 10 * len(text)  # the check can fail


def test_an_empty_library_names_why_its_texts_gave_nothing():
    library = [probes.ProbedText(f"t{i}", "", f"{i:064x}", "") for i in range(12)]
    config = ProbeConfig(probe="decop", min_library=10)
    with pytest.raises(DocauditError, match="12 of its 12 texts had no passage to probe.*--paraphrases"):
        probes.judge([], library, config, 0)
