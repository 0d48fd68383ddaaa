"""The stored extraction library: the baseline it gives equals the one the same texts give when run, it applies only
to the model and settings it was computed with, and a damaged file is refused in one line."""

from __future__ import annotations

import json

import pytest
from test_extract import texts  # noqa: F401  (the fixture)

from docaudit.api.extract import ExtractRequest, extract_books
from docaudit.audit.extraction import baseline, extract_audit
from docaudit.audit.extraction_library import library_document, library_key, read_library, text_figures
from docaudit.config import EXTRACT_NULL, ExtractConfig, ModelConfig
from docaudit.corpus.documents import load_documents
from docaudit.errors import DocauditError
from docaudit.query.models import load_model
from docaudit.run import DocumentSpec

CONFIG = ExtractConfig(stride=25)
RAW = DocumentSpec(raw=True)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Tiny models: one torch thread."""


@pytest.fixture(scope="module")
def stored(texts, tiny_gpt2, tmp_path_factory):  # noqa: F811
    """The three library texts' figures stored for the tiny GPT-2 at ``CONFIG``."""
    lm = load_model(ModelConfig(model=str(tiny_gpt2), device="cpu"))
    docs = load_documents([str(texts / "library")], raw=True)
    found = extract_audit(docs, [], lm, CONFIG)["books"]
    figures = [text_figures(t.document.sha256, t.summary) for t in found]
    path = tmp_path_factory.mktemp("stored") / "library.json"
    path.write_text(json.dumps(library_document(library_key(lm, CONFIG), {"texts": "three"}, figures)), "utf-8")
    return lm, path


def test_the_stored_baseline_is_the_run_baseline(texts, stored):  # noqa: F811
    lm, path = stored
    book = [str(texts / "book.txt")]
    run = extract_books(ExtractRequest(book, lm, [str(texts / "library")], CONFIG, RAW, stored_library=None))
    kept = extract_books(ExtractRequest(book, lm, None, CONFIG, RAW, stored_library=path))
    live, read = run.body["books"][0]["baseline"], kept.body["books"][0]["baseline"]
    assert live.pop("source") == "--null-library" and read.pop("source") == "stored"
    assert read == live and read["texts"] == 3
    assert kept.body["baseline"] == {"source": "stored", "path": str(path), "texts": 3, "provenance": "three"}
    assert kept.body["library"] == []  # no text was run


def test_another_setting_or_model_gets_no_stored_baseline_and_says_why(texts, stored, tiny_llama):  # noqa: F811
    lm, path = stored
    book = [str(texts / "book.txt")]
    other = extract_books(ExtractRequest(book, lm, None, ExtractConfig(stride=25, n=2), RAW, stored_library=path))
    assert other.body["books"][0]["baseline"] is None
    assert "--n 1, this run uses 2" in other.body["baseline"]["why"]
    llama = load_model(ModelConfig(model=str(tiny_llama), device="cpu"))
    moved = extract_books(ExtractRequest(book, llama, None, CONFIG, RAW, stored_library=path))
    assert moved.body["books"][0]["baseline"] is None and "another model" in moved.body["baseline"]["why"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["texts"][0].update(extractable_share=1.5),
        lambda d: d["texts"][0].update(max_pz=float("nan")),
        lambda d: d["texts"][0].update(examples=True),
        lambda d: d["texts"][0].update(tokens=2.5),
        lambda d: d["texts"][0].pop("greedy_share"),
        lambda d: d.update(texts=[]),
        lambda d: d.update(format=2),
        lambda d: d.update(kind="controls_null"),
    ],
)
def test_a_damaged_library_is_refused_in_one_line(stored, tmp_path, damage):
    lm, path = stored
    data = json.loads(path.read_text("utf-8"))
    damage(data)
    bad = tmp_path / "library.json"
    bad.write_text(json.dumps(data), "utf-8")
    with pytest.raises(DocauditError) as refused:
        read_library(bad, library_key(lm, CONFIG))
    assert "\n" not in str(refused.value) and str(bad) in str(refused.value)


def test_the_baseline_counts_against_a_slow_count():
    figures = [{"extractable_share": s, "greedy_share": s / 2} for s in (0.0, 0.1, 0.1, 0.3, 0.5)]

    class Book:
        summary = {"extractable_share": 0.1}

    got = baseline(Book(), figures, "stored")
    shares = sorted(f["extractable_share"] for f in figures)
    assert got["at_or_above"] == len([s for s in shares if s >= 0.1]) == 4
    assert got["rank"] == 1 + len([s for s in shares if s > 0.1]) == 3
    assert got["median_share"] == shares[2] and got["max_share"] == 0.5 and got["max_greedy_share"] == 0.25


def test_the_shipped_library_reads_whole():
    data = json.loads(EXTRACT_NULL.read_text("utf-8"))
    figures, provenance, differs = read_library(EXTRACT_NULL, data["key"])
    assert differs is None and len(figures) == 80 and "2024" in provenance["texts"]
    assert data["key"]["settings"] == {k: getattr(ExtractConfig(), k) for k in data["key"]["settings"]}
