"""``controls`` across books: several books' passages written in one decoding loop give each book the suffixes it
gets alone; and its estimate (``--dry-run``, the start line) from the generated and scored tokens at the rates this
machine measured, counted apart."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit.audit import costs
from docaudit.cli import main
from docaudit.config import ControlsConfig, ModelConfig
from docaudit.config.rules import LOAD_SECONDS, OTHER_SECONDS_PER_TOKEN
from docaudit.query import rates

SMALL = ControlsConfig(
    passages=4, stretch_tokens=40, context_tokens=6, prefix_tokens=6, suffix_tokens=8, samples=2, block=2
)


@pytest.fixture(scope="module")
def books():
    from docaudit.corpus.base import Document

    texts = [corpus_text("members", b, n_chars=2000) for b in corpus_ids("members", 3)]
    return [
        Document(f"book{i}", f"book{i}.txt", t, hashlib.sha256(t.encode()).hexdigest()) for i, t in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def generator(tiny_gpt2):
    from docaudit.query.models import load_model

    return load_model(ModelConfig(model=str(tiny_gpt2)))


def _written(books, generator, config, cache, monkeypatch):
    """Every book's passages through ``passages_of_books``, into an empty cache folder ``cache``."""
    from docaudit.audit.synthetic_controls import passages_of_books

    monkeypatch.setenv("DOCAUDIT_CACHE", str(cache))
    out = {i: (p, new) for i, p, new, _ in passages_of_books(books, generator, config, 5)}
    return [out[i] for i in range(len(books))]


def test_a_books_suffixes_are_the_same_alone_and_beside_other_books(books, generator, tmp_path, monkeypatch):
    """At temperature 1 (every row its own uniforms), a book written alone, one loop at a time, and written in
    loops shared with two other books (8 passages a loop: a loop holds two books) gets the same passages and
    suffixes; the cache then gives them back without generating."""
    from docaudit.audit.synthetic_controls import book_passages

    shared = replace(SMALL, generation_rows=8 * SMALL.samples)
    together = _written(books, generator, shared, tmp_path / "together", monkeypatch)
    assert all(new for _, new in together)
    for i, book in enumerate(books):
        monkeypatch.setenv("DOCAUDIT_CACHE", str(tmp_path / f"alone{i}"))
        alone, new = book_passages(book.text, book.sha256, generator, replace(SMALL, generation_rows=1), 5)
        assert new and alone == together[i][0]
    assert len({p.synthetic for passages, _ in together for p in passages}) == 3 * SMALL.passages
    again = _written(books, generator, shared, tmp_path / "together", monkeypatch)
    assert [p for p, _ in again] == [p for p, _ in together] and not any(new for _, new in again)


def test_books_in_the_cache_keep_their_place_among_those_written(books, generator, tmp_path, monkeypatch):
    """A cached book between two written together comes back in its own place."""
    shared = replace(SMALL, generation_rows=100)
    _written(books[1:2], generator, shared, tmp_path / "c", monkeypatch)
    mixed = _written(books, generator, shared, tmp_path / "c", monkeypatch)
    assert [new for _, new in mixed] == [True, False, True]
    alone = [_written([b], generator, shared, tmp_path / f"a{i}", monkeypatch)[0][0] for i, b in enumerate(books)]
    assert [p for p, _ in mixed] == alone


def test_the_estimate_counts_generation_and_scoring_at_their_own_measured_rates():
    target = ModelConfig(model="some/hub-model")
    reference = ModelConfig(model="other/hub-model")
    rates.record_controls(target, "generated_per_s", 400, 10.0)  # 40 generated tokens/s
    rates.record_controls(target, "scored_per_s", 3000, 10.0)  # 300 scored tokens/s
    rates.record_controls(reference, "scored_per_s", 1000, 10.0)  # 100
    rates.record_load(target, 4.0)
    cost = {"texts": 2, "passages": 32, "tokens_generated": 3072, "tokens_scored": 2 * 6208}
    models = {"target": target, "generator": target, "reference": reference}
    plan = costs.controls_plan(cost, models)
    seconds = {s.name: s.seconds for s in plan.steps}
    assert seconds["loading the target"] == 4.0
    assert seconds["loading the reference"] == LOAD_SECONDS["transformers"]  # not measured: documented
    assert seconds["generation (the generator's synthetic suffixes)"] == pytest.approx(3072 / 40)
    assert seconds["scoring by the target (context, prefix and suffix)"] == pytest.approx(6208 / 300)
    assert seconds["scoring by the reference (context, prefix and suffix)"] == pytest.approx(6208 / 100)
    assert "loading the generator" not in seconds  # the target writes its own suffixes
    assert plan.seconds == pytest.approx(sum(seconds.values()))
    assert set(plan.rates.measured) == {"load", "generation", "scoring"}
    given = costs.controls_plan(cost, models, loaded=("target", "reference"))
    assert not any(s.name.startswith("loading") for s in given.steps)


def test_a_short_measurement_is_not_kept_and_the_rest_is_counted():
    model = ModelConfig(model="some/hub-model")
    rates.record_controls(model, "generated_per_s", 10, 0.5)
    assert rates.measured(rates.model_key(model), "generated_per_s") is None
    with rates.clock() as spent:
        rates.record_controls(model, "scored_per_s", 2000, 4.0)
    assert spent["passes"] == 4.0 and spent["tokens"] == 2000
    rates.record_other("controls", 2000, 1.0)
    cost = {"texts": 1, "passages": 16, "tokens_generated": 1536, "tokens_scored": 6208}
    plan = costs.controls_plan(cost, {"target": model, "generator": model, "reference": None}, ("target",))
    rest = [s for s in plan.steps if s.name.startswith("the rest")]
    assert rest and rest[0].seconds == pytest.approx((1536 + 6208) * 1.0 / 2000)
    assert "rest" in plan.rates.measured


def test_dry_run_states_the_time(tmp_path, tiny_gpt2):
    (tmp_path / "books").mkdir()
    (tmp_path / "library").mkdir()
    for i, b in enumerate(corpus_ids("nonmembers", 4)):
        folder = tmp_path / ("books" if i == 0 else "library")
        (folder / f"{b}.txt").write_text(corpus_text("nonmembers", b, n_chars=3000))
    model = ModelConfig(model=str(tiny_gpt2))
    rates.record_controls(model, "generated_per_s", 1536, 1536 / 20)  # 20 tok/s
    rates.record_controls(model, "scored_per_s", 6208, 6208 / 100)  # 100 tok/s
    rates.record_load(model, 2.0)
    args = ["controls", str(tmp_path / "books"), "--model", str(tiny_gpt2), "--generator", str(tiny_gpt2)]
    args += ["--null-library", str(tmp_path / "library"), "--preset", "fast"]
    result = CliRunner().invoke(main, [*args, "--dry-run"])
    assert result.exit_code == 0, result.output
    # 4 texts of 16 passages: 4 x 16 x 3 x 32 generated tokens at 20/s, 4 x 16 x 4 x 97 scored at 100/s, 2 s load
    tokens = 4 * 16 * 3 * 32 + 4 * 16 * 4 * 97
    expected = 2 + 4 * 16 * 3 * 32 / 20 + 4 * 16 * 4 * 97 / 100 + tokens * OTHER_SECONDS_PER_TOKEN.get("controls", 0)
    first = result.output.splitlines()[0]
    assert f"~{expected / 60:.1f} min in all" in first, first
    assert "measured on this machine: load, generation, scoring" in first
    assert "generation (the generator's synthetic suffixes): ~6,144 tokens at 20 tok/s" in result.output
    assert "assumes:" in result.output and "nothing was loaded" in result.output
