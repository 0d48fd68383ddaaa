"""Copyright traps: generation (retokenization, near duplicates, perplexity), planting (originals untouched, registry
complete), the exact test (against a full enumeration and under the null) and detection on a tiny trained target."""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import CORPUS, corpus_ids, corpus_text, make_model, make_tokenizer
from scipy.stats import binom, combine_pvalues

from docaudit.audit.traps import mann_whitney, smallest_p
from docaudit.cli import main
from docaudit.config import ModelConfig, TrapConfig
from docaudit.corpus.cleaning import clean_text, gutenberg_bounds, normalize_newlines
from docaudit.corpus.prose import ProseCheck
from docaudit.corpus.traps import PRIVATE_NOTE, insert_copies, jaccard, paragraph_starts, read_registry
from docaudit.inference.permutation import rank_sum_test
from docaudit.query.generate import generate_sequences, retokenizes
from docaudit.query.models import load_model

SHORT = TrapConfig(tokens=4, per_document=4, copies=3, jaccard=0.5, max_candidates=5000)


@pytest.fixture(scope="module")
def generator(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("generator"), "llama")


def test_insert_copies_keeps_the_text_and_records_positions():
    text = "First paragraph.\n\nSecond one,\nstill second.\n\n\nThird.\n"
    assert paragraph_starts(text) == [0, 18, 46]
    traps = ["TRAP ONE", "TRAP TWO"]
    out, positions = insert_copies(text, traps, 4, np.random.default_rng(0))
    rest = out
    for trap, pos in zip(traps, positions):
        assert len(pos) == 4
        for p in pos:
            assert out[p : p + len(trap)] == trap
            assert p == 0 or out[p - 2 : p] == "\n\n"  # each copy starts a paragraph
        rest = rest.replace(trap + "\n\n", "")
    assert rest == text


@pytest.mark.parametrize("path", ["members/45.txt", "nonmembers/74346.txt"])
def test_traps_are_planted_only_in_the_body_the_cleaning_keeps(path):
    """A whole book as published (Project Gutenberg header, licence, producer credits; CRLF or LF): every copy of
    every trap lands between the START and END markers and survives docaudit's own cleaning."""
    raw = (CORPUS / path).read_bytes().decode("utf-8")
    traps = [f"Trap {i}: the lamplighter counted the bridges of the river twice before dawn." for i in range(8)]
    out, positions = insert_copies(raw, traps, 100, np.random.default_rng(3))
    cleaned = clean_text(out)
    assert [cleaned.count(t) for t in traps] == [100] * 8
    lines = normalize_newlines(out).split("\n")
    start, end = gutenberg_bounds(lines)
    assert 0 < start < end < len(lines) or path.startswith("nonmembers")
    for trap, at in zip(traps, positions):
        found = [i for i, line in enumerate(lines) if line.strip() == trap]  # each copy a paragraph of its own
        assert len(found) == len(at) == 100 and all(start < i < end for i in found)


def test_prose_check_rejects_the_junk_a_generator_writes_and_keeps_english_prose():
    book = clean_text(corpus_text("members", "45", n_chars=60000))
    check = ProseCheck.of([book], special=("<start_of_image>", "<bos>", "<unused12>"))
    assert check.language == "en" and check.scripts == {"LATIN"}
    junk = {
        "markup": "<strong>By:</strong> Sarah Miller, staff writer, reports on the news of the week in the county",
        "special token": "<start_of_image> and then the quiet house woke to the sound of rain on the old roof",
        "code": "import React from 'react';\nimport { useState } from 'react';\nexport default App;",
        "language": "Pemerintah Indonesia mengumumkan bahwa harga bahan bakar akan naik mulai minggu depan di "
        "seluruh wilayah negara, kata menteri energi kepada wartawan di Jakarta pada hari Senin.",
        "script": "Сегодня в Москве прошла встреча министров иностранных дел двух стран по вопросам торговли.",
        "characters": "Tel. 555-0199 | Fax 555-0123 | ISBN 978-3-16-148410-0 | 2024-10-01 | 12:30",
        # what the embedded Gemma wrote after a passage of The Marvellous Land of Oz (docs/traps.md)
        "paragraph break": '"A DASH TO LIBERTY OR TO DEATH."\n\n\n\n107\nfor breath and hold firmly to the post he had',
    }
    for reason, text in junk.items():
        assert check.problem(text) == reason, (reason, text)
    prose = [
        "She was a woman of narrow experience, and it was with some difficulty that she had been persuaded to take "
        "the child into the house at all, for she did not like to be disturbed in her ways.",
        "The old road wound down the hill between the birches, and at the foot of it the brook ran quickly over "
        "its stones, as it had done for a hundred years before any of them were born.",
    ]
    assert [check.problem(t) for t in prose] == [None, None]


def test_generation_counts_what_the_prose_check_rejects(generator):
    """A generator that writes no English (a tiny random model) gets no trap past the check of an English book, and
    the refusal says which checks rejected its candidates."""
    from dataclasses import replace

    from docaudit.errors import DocauditError

    lm = load_model(ModelConfig(model=str(generator)))
    check = ProseCheck.of([corpus_text("members", "45", n_chars=20000)])
    with pytest.raises(DocauditError, match=r"'not prose: (language|characters|script|markup|code)'") as refused:
        generate_sequences(lm, 2, replace(SHORT, tokens=12, max_candidates=32), 1, prose=check)
    assert "writes prose in the documents' language" in str(refused.value)


def test_retokenization_check_rejects_ids_that_do_not_come_back():
    tok = make_tokenizer([corpus_text("members", b) for b in corpus_ids("members", 2)], 400)
    canonical = tok("the weather", add_special_tokens=False).input_ids
    assert retokenizes(tok, canonical) == "the weather"
    split = [i for ch in "the weather" for i in tok(ch, add_special_tokens=False).input_ids]
    assert split != canonical and retokenizes(tok, split) is None
    assert retokenizes(tok, tok(" the", add_special_tokens=False).input_ids) is None  # leading space
    # a blank line is one token alone but two before a word (byte-level pre-tokenization): the check finds the ids
    paragraphs = make_tokenizer(["one paragraph.\n\nthe weather\n\n" * 50], 300)
    assert paragraphs("Text.\n\n", add_special_tokens=False).input_ids[-1] == paragraphs.convert_tokens_to_ids("ĊĊ")
    ids = paragraphs("the weather", add_special_tokens=False).input_ids
    assert retokenizes(paragraphs, ids) == "the weather"


def test_generated_sequences_pass_every_check(generator):
    lm = load_model(ModelConfig(model=str(generator)))
    made = generate_sequences(lm, 12, SHORT, 1)
    seqs = made.sequences
    assert len(seqs) == 12 and made.rejected["retokenization"] > 0
    for s in seqs:
        assert len(s.token_ids) == SHORT.tokens
        assert lm.tokenizer(s.text, add_special_tokens=False).input_ids == s.token_ids
    for a, b in itertools.combinations(seqs, 2):
        assert jaccard(set(a.token_ids), set(b.token_ids)) <= SHORT.jaccard
    # perplexity: one plain forward pass per sequence after the BOS
    with torch.no_grad():
        for s in seqs[:4]:
            ids = torch.tensor([[lm.tokenizer.bos_token_id, *s.token_ids]])
            logp = torch.log_softmax(lm.model(input_ids=ids).logits[0, :-1].double(), -1)
            nll = -logp[torch.arange(len(s.token_ids)), ids[0, 1:]].mean()
            assert s.perplexity == pytest.approx(math.exp(float(nll)), rel=1e-4)


def _docs(tmp_path, n=3):
    folder = tmp_path / "books"
    folder.mkdir()
    for b in corpus_ids("nonmembers", n):
        (folder / f"{b}.txt").write_text(corpus_text("nonmembers", b, n_chars=3000), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_traps_make_writes_copies_and_a_complete_registry(tmp_path, generator):
    docs = _docs(tmp_path)
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    out, reg = tmp_path / "publish", tmp_path / "private.json"
    args = ["traps", "make", str(docs), "--generator", str(generator), "--out", str(out), "--registry", str(reg)]
    args += ["--tokens", "4", "--traps-per-doc", "4", "--copies", "3", "--jaccard", "0.5", "--seed", "1", "--any-text"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before  # originals untouched
    raw = json.loads(reg.read_text())
    assert raw["private_note"] == PRIVATE_NOTE and raw["seed"] == 1 and raw["generator"]["identity"]
    registry = read_registry(reg)
    assert len(registry.documents) == 3
    seen = set()
    for d in registry.documents:
        data = (out / d.output).read_bytes()
        assert hashlib.sha256(data).hexdigest() == d.output_sha256
        assert hashlib.sha256(before[d.output]).hexdigest() == d.source_sha256
        text = data.decode("utf-8")
        assert len(d.traps) == len(d.controls) == 4
        for t in d.traps:
            assert len(t.positions) == 3 and all(text[p : p + len(t.text)] == t.text for p in t.positions)
        for s in d.traps + d.controls:
            assert s.token_ids and s.perplexity >= 1.0 and s.text not in seen
            seen.add(s.text)
        removed = text
        for t in d.traps:
            removed = removed.replace(t.text + "\n\n", "")
        assert removed == before[d.output].decode("utf-8")
    assert not any(
        "registry" in p.name or p.suffix == ".json" and p.name != ".docaudit-output.json" for p in out.iterdir()
    )
    # detect: a row per document with its p-value and verdict (JSON), the same rows and the pooled one (CSV)
    detect = ["traps", "detect", "--registry", str(reg), "--model", str(generator), "--reference-model", str(generator)]
    tested = CliRunner().invoke(main, [*detect, "--format", "json"])
    # the generator tested by mistake (here on purpose): a warning on stderr, the JSON on stdout says it too
    assert "the model tested is the generator of these traps" in tested.stderr
    assert json.loads(tested.stdout)["warning"] == tested.stderr.strip()
    rows = json.loads(tested.stdout)["documents"]
    assert [r["document"] for r in rows] == [d.id for d in registry.documents]
    # the same model as target and reference: every ref score is 0, all ties, so AUC 1/2, p-value 1 and no evidence
    assert all(
        r["auc_ref"] == 0.5 and r["p_value"] == 1.0 and r["verdict"] == "no evidence of membership" for r in rows
    )
    csv = CliRunner().invoke(main, [*detect, "--format", "csv"]).stdout.splitlines()
    assert csv[0].startswith("document,n_traps,n_controls,auc_loss,auc_minkpp,auc_ref,p_value") and len(csv) == 5
    # a second run refuses to overwrite the registry; a registry inside --out is refused
    base = [
        "traps",
        "make",
        str(docs),
        "--generator",
        str(generator),
        "--tokens",
        "4",
        "--jaccard",
        "0.5",
        "--any-text",
    ]
    again = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "other"), "--registry", str(reg)])
    assert again.exit_code != 0 and "--overwrite" in again.output
    inside = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "o2"), "--registry", str(tmp_path / "o2" / "r")])
    assert inside.exit_code != 0 and "must not be inside" in inside.output


def test_bad_registry_is_a_one_line_error(tmp_path):
    bad = tmp_path / "r.json"
    for content in (
        "{",
        json.dumps({"format": "x"}),
        json.dumps({"format": "docaudit-trap-registry/1", "documents": [{}]}),
    ):
        bad.write_text(content)
        r = CliRunner().invoke(main, ["traps", "detect", "--registry", str(bad), "--model", str(tmp_path)])
        assert r.exit_code != 0 and r.output.startswith("error:") and r.output.count("\n") == 1


def _splits(n: int, k: int) -> np.ndarray:
    """Every way to choose which ``k`` of ``n`` values are the traps, as a boolean matrix (one row per split)."""
    rows = np.zeros((math.comb(n, k), n), bool)
    for r, idx in enumerate(itertools.combinations(range(n), k)):
        rows[r, list(idx)] = True
    return rows


def _u_statistics(values, splits: np.ndarray) -> np.ndarray:
    """Per split, the pairs (trap, control) where the trap scores higher, ties counted one half."""
    values = np.asarray(values, dtype=float)
    wins = (values[:, None] > values[None, :]) + 0.5 * (values[:, None] == values[None, :])
    return ((splits @ wins) * ~splits).sum(axis=1)


def _enumerated_p(x, y):
    """The exact one-sided p-value by listing every way to choose which values are the traps: the share of splits
    whose U statistic is at least the observed one."""
    u = _u_statistics(np.concatenate([x, y]), _splits(len(x) + len(y), len(x)))
    return float(np.mean(u >= u[0] - 1e-9))  # the first split is the observed one


def test_mann_whitney_is_the_full_enumeration_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.normal(0.5, 1, 4), rng.normal(0, 1, 5)
        test = mann_whitney(x, y)
        assert test.p_value == pytest.approx(_enumerated_p(x, y), rel=1e-12) and test.method == "exact"
        assert test.auc == pytest.approx(np.mean([a > b for a in x for b in y]))
    for _ in range(25):  # few distinct values: many ties, groups of unequal sizes either way round
        n_x, n_y = (int(v) for v in rng.integers(1, 8, 2))
        x, y = rng.integers(0, 3, n_x) + rng.integers(0, 2), rng.integers(0, 3, n_y)
        assert mann_whitney(x, y).p_value == pytest.approx(_enumerated_p(x, y), rel=1e-12)
    # 8 traps and 8 controls, scores on four levels: the normal approximation says 0.0049, the splits 0.0093
    x, y = np.array([3, 3, 3, 2, 2, 2, 1, 1]), np.array([2, 1, 1, 0, 0, 0, 0, 0])
    assert mann_whitney(x, y).p_value == pytest.approx(_enumerated_p(x, y), rel=1e-12)
    assert smallest_p(4, 4) == pytest.approx(1 / 70)


@pytest.mark.parametrize("values", [[0] * 13 + [1] * 3, [0] * 9 + [1] * 7, [0] * 5 + [1] * 6 + [2] * 5])
def test_mann_whitney_holds_its_level_on_every_split_of_tied_scores(values):
    """Under H0 every split of the 16 observed scores into 8 traps and 8 controls is equally likely, so the null
    rate of p <= alpha is the share of the 12,870 splits with p <= alpha, known without simulation noise: at most
    alpha for a valid test. (The normal approximation reaches 10% at alpha 0.05 on the first scores, 2% at 0.01 on
    the second.) Splits with the same U statistic have the same p-value: one of each is tested, weighted by how
    many there are."""
    values = np.asarray(values, dtype=float)
    splits = _splits(16, 8)
    u = _u_statistics(values, splits)
    levels, first, counts = np.unique(u, return_index=True, return_counts=True)
    p = np.array([mann_whitney(values[splits[i]], values[~splits[i]]).p_value for i in first])
    for alpha in (0.01, 0.05):
        assert counts[p <= alpha].sum() / len(u) <= alpha
    assert p == pytest.approx([np.mean(u >= level) for level in levels], rel=1e-12)


def test_mann_whitney_holds_its_level_on_continuous_and_rounded_scores():
    """2,000 null draws each: the rate of p < 0.05 stays below 0.05 + 2 standard errors (0.060), which a rate of
    0.10 (doubled) exceeds with probability above 0.999."""
    rng = np.random.default_rng(1)
    for rounded in (False, True):
        draws = rng.normal(size=(2000, 2, 8))
        draws = np.round(draws) if rounded else draws
        p = np.array([mann_whitney(*d).p_value for d in draws])
        assert np.mean(p < 0.05) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


def test_monte_carlo_p_value_beyond_the_exact_count():
    """Past the exact count's size the p-value comes from random splits, says so, is never below 1/(B + 1), agrees
    with the exact count, and holds its level (600 null draws with 19 splits each: p <= 0.05 only when no split
    reaches the observed rank sum, probability exactly 1/20)."""
    rng = np.random.default_rng(2)
    x, y = np.round(rng.normal(0.4, 1, 30), 1), np.round(rng.normal(0, 1, 25), 1)
    exact = rank_sum_test(x, y)
    sampled = rank_sum_test(x, y, exact_work=0, resamples=4999, seed=3)
    assert exact.method == "exact" and sampled.method == "monte carlo" and sampled.resamples == 4999
    assert sampled.p_value == pytest.approx(exact.p_value, abs=4 * math.sqrt(exact.p_value / 4999) + 1e-3)
    assert rank_sum_test(np.arange(10.0) + 100, np.arange(10.0), exact_work=0, resamples=99).p_value == 1 / 100
    draws = rng.normal(size=(600, 2, 8))
    p = np.array([rank_sum_test(*d, exact_work=0, resamples=19, seed=i).p_value for i, d in enumerate(draws)])
    assert np.mean(p <= 0.05) <= binom.ppf(0.999, 600, 0.05) / 600


def test_lab_detects_traps_in_trained_documents_only(tmp_path, generator, one_thread):
    pool = tmp_path / "pool"
    pool.mkdir()
    for b in corpus_ids("members", 6):
        (pool / f"{b}.txt").write_text(corpus_text("members", b, n_chars=1500), encoding="utf-8")
    r = CliRunner().invoke(
        main,
        ["lab", "--corpus", str(pool), "--out", str(tmp_path / "lab"), "--format", "json", "--epochs", "8"]
        + ["--layers", "2", "--width", "64", "--positions", "64", "--vocab-size", "512", "--train-batch-size", "8"]
        + ["--doc-tokens", "300", "--trap-copies", "20", "--trap-tokens", "4", "--traps-per-doc", "4", "--any-text"]
        + ["--generator", str(generator)],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["traps"]["copies"] == 20 and summary["traps"]["tokens"] == 4
    rows = summary["detection"]["documents"]
    trained = [d for d in rows if d["trained"]]
    untrained = [d for d in rows if not d["trained"]]
    assert len(trained) == len(untrained) == 3
    assert all(d["auc_loss"] == 1.0 and d["p_value"] == pytest.approx(1 / 70) for d in trained)
    assert all(d["verdict"] == "evidence of membership" for d in trained)
    # never trained on: each document's exact p-value is valid and they are independent, so Fisher's combination of
    # them is a valid p-value (conservative for discrete p-values); below 0.01 it says the untrained traps were
    # learned (all three at the floor 1/70, as if trained, give 0.0003)
    assert combine_pvalues([d["p_value"] for d in untrained], method="fisher").pvalue > 0.01
    registry = read_registry(tmp_path / "lab" / "traps-registry.json")
    members = {p.name for p in (tmp_path / "lab").iterdir()}
    assert "traps.csv" in members and len(registry.documents) == 6


def test_traps_longer_than_the_generator_takes_are_refused(tmp_path, generator):
    docs = _docs(tmp_path, 1)
    args = ["traps", "make", str(docs), "--generator", str(generator), "--out", str(tmp_path / "o")]
    r = CliRunner().invoke(main, [*args, "--registry", str(tmp_path / "r.json"), "--tokens", "250"])
    assert r.exit_code != 0 and r.output.startswith("error: --tokens 250 is too long for the generator")
    assert not (tmp_path / "o").exists() and not (tmp_path / "r.json").exists()


def test_traps_make_dry_run_says_what_it_would_plant_and_writes_nothing(tmp_path):
    docs = _docs(tmp_path, 2)
    out, reg = tmp_path / "publish", tmp_path / "private.json"
    args = ["traps", "make", str(docs), "--out", str(out), "--registry", str(reg), "--dry-run"]
    r = CliRunner().invoke(main, args)  # the defaults: the README's advice, 8 traps of 100 tokens, 10 copies
    assert r.exit_code == 0, r.output
    assert "of 100 tokens, 10 copies each" in r.stdout
    assert r.stdout.startswith("dry run: 16 traps (8 per document") and "in 2 documents" in r.stdout
    added = 8 * 10 * (100 * 4 + 2)
    for f in sorted(docs.iterdir()):
        assert f"  {f.name}: +{added:,} bytes ({added / f.stat().st_size:+.1%})" in r.stdout
    assert "32 sequences to generate; time at least ~" in r.stdout and "nothing was loaded or written" in r.stdout
    assert not out.exists() and not reg.exists()
    # the checks of the real run: a registry inside --out is refused before anything
    inside = CliRunner().invoke(main, [*args[:-3], "--registry", str(out / "r.json"), "--dry-run"])
    assert inside.exit_code != 0 and "must not be inside" in inside.output


def test_traps_are_written_after_passages_of_their_own_book_and_read_as_prose(tmp_path, generator):
    """``traps make`` samples each candidate after a passage of the body of the book it goes into: a generator that
    continues the book where the passage ends (the tiny model's ``generate`` replaced by a reader of the book) gives
    traps that are that book's own next paragraph, pass the prose check and are planted; from a BOS alone it has
    nothing to continue and every candidate fails the check."""
    from dataclasses import replace

    from docaudit.audit.traps import make_traps
    from docaudit.corpus.documents import load_documents
    from docaudit.errors import DocauditError

    folder = tmp_path / "long"
    folder.mkdir()
    for b in corpus_ids("nonmembers", 2):
        (folder / f"{b}.txt").write_text(corpus_text("nonmembers", b, n_chars=30000), encoding="utf-8")
    docs = load_documents([folder], raw=True)
    lm = load_model(ModelConfig(model=str(generator)))
    tok, model = lm.tokenizer, lm.model
    prompts = []

    def continue_the_book(inputs, max_new_tokens, **kwargs):
        rows = []
        for row in inputs.tolist():
            passage = tok.decode(row[1:], skip_special_tokens=True).lstrip("\ufffd")  # a cut character
            prompts.append(passage)
            book = next((d.text for d in docs if passage and passage in d.text), None)
            follows = "" if book is None else book[book.index(passage) + len(passage) :]
            ids = tok(follows, add_special_tokens=False).input_ids[:max_new_tokens] if follows else []
            ids += [5] * (max_new_tokens - len(ids))
            rows.append(row + ids)
        return torch.tensor(rows)

    model.generate = continue_the_book
    config = replace(
        SHORT, tokens=12, per_document=2, copies=2, context_tokens=16, max_perplexity=1e9, max_candidates=256
    )
    plan = make_traps(docs, lm, config, 0)
    missing = [p for p in prompts if not any(p in d.text for d in docs)]
    assert prompts and not missing, missing[:3]
    check = ProseCheck.of([d.text for d in docs])
    for doc, entry in zip(docs, plan.registry.documents):
        body = " ".join(doc.text.split())
        for s in entry.traps + entry.controls:
            assert check.problem(s.text) is None
            assert " ".join(s.text.split()) in body  # the book's own words, not another's
        for t in entry.traps:
            assert all(plan.texts[entry.output][p : p + len(t.text)] == t.text for p in t.positions)
    with pytest.raises(DocauditError, match="not prose"):
        make_traps(docs, lm, replace(config, context_tokens=0, max_candidates=64), 0)
