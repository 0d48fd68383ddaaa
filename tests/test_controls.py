"""``controls``: the paired synthetic-control test. Its statistics against slow references and null simulations,
bits per byte against a plain forward pass, the placebo and a trained book on a tiny target, the command's outputs,
cache and refusals."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import CORPUS, corpus_ids, corpus_text, shelf_of
from reference import full_softmax_rows, token_ids

from docaudit.audit.synthetic_controls import BookControls, judge
from docaudit.cli import main
from docaudit.config import ControlsConfig, ModelConfig, ProbeConfig
from docaudit.errors import DocauditError
from docaudit.inference.controls import block_mean, contrasts, dependent_interval
from docaudit.run import RunContext

SMALL = ControlsConfig(
    passages=8,
    stretch_tokens=48,
    context_tokens=8,
    prefix_tokens=8,
    suffix_tokens=16,
    samples=3,
    block=2,
    min_library=10,
)
SMALL_ARGS = ["--passages", "8", "--stretch-tokens", "48"]
SMALL_ARGS += ["--context-tokens", "8", "--prefix-tokens", "8", "--suffix-tokens", "16"]
SMALL_ARGS += ["--samples", "3", "--block", "2"]


def test_block_mean_is_the_batch_means_estimate():
    values = np.arange(10.0) ** 1.5
    got = block_mean(values, 3)  # 3 blocks: sizes 4, 3, 3
    groups = [values[0:4], values[4:7], values[7:10]]
    means = [sum(g) / len(g) for g in groups]
    centre = sum(means) / 3
    se = math.sqrt(sum((m - centre) ** 2 for m in means) / 2 / 3)
    assert got.mean == pytest.approx(values.mean()) and got.se == pytest.approx(se) and got.df == 2


def test_contrasts_and_placebo():
    real = np.array([1.0, 2.0])
    synthetic = np.array([[0.0, 1.0, 2.0], [4.0, 2.0, 0.0]])
    delta, placebo = contrasts(real, synthetic)
    assert delta.tolist() == [0.0, 0.0] and placebo.tolist() == [-1.5, 3.0]
    with pytest.raises(ValueError):
        contrasts(real, synthetic[:, :1])


def _ar1(rng, rho: float, n: int, size: int) -> np.ndarray:
    e = rng.standard_normal((size, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for i in range(1, n):
        x[:, i] = rho * x[:, i - 1] + math.sqrt(1 - rho**2) * e[:, i]
    return x


@pytest.mark.parametrize("n", [16, 32])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_contrast_interval_covers_when_neighbouring_passages_correlate(n, rho):
    """Passages in book order correlating at lag 1 up to 0.8 (batch means over blocks of 4 covered 76% at 0.8): the
    95% interval covers the expected contrast for at least 95% of 2,000 books, less three standard errors."""
    x = 0.3 + 2.0 * _ar1(np.random.default_rng(int(rho * 10) + n), rho, n, 2000)
    covered = np.mean([lo <= 0.3 <= hi for lo, hi in map(dependent_interval, x)])
    assert covered >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 2000), covered


def _tested(i: int, deltas, placebo_rng) -> BookControls:
    deltas = np.asarray(deltas, dtype=float)
    return BookControls(
        f"t{i}",
        f"t{i}.txt",
        f"{i:064x}",
        len(deltas),
        contrast=block_mean(deltas, 2),
        placebo=block_mean(placebo_rng.standard_normal(len(deltas)), 2),
        deltas=deltas.tolist(),
    )


def test_a_small_library_is_inconclusive_and_a_book_is_left_out_of_its_own_comparison():
    rng = np.random.default_rng(5)
    library = [_tested(i, rng.normal(size=16), rng) for i in range(12)]
    book = _tested(3, np.full(16, 5.0), rng)  # the library's fourth text (same SHA-256), far above every other
    [verdict] = judge([book], library, replace(SMALL, min_library=10))
    assert book.library_texts == 11 and book.p_value == pytest.approx(1 / 12) and book.smallest_p == 1 / 12
    assert verdict.verdict == "inconclusive" and verdict.reason_codes == ("too_small_library",)
    assert "20 would be needed" in verdict.reason
    big = [_tested(i, rng.normal(size=16), rng) for i in range(40)]
    [verdict] = judge([_tested(99, np.full(16, 5.0), rng)], big, replace(SMALL, min_library=10))
    assert verdict.verdict == "evidence of membership" and verdict.p_value == pytest.approx(1 / 41)


def test_block_t_test_is_uniform_under_the_null():
    """Independent passages of mean 0: the one-sided t-test of their block means fires at its level."""
    rng = np.random.default_rng(1)
    p = np.array([block_mean(x, 4).t_p_value() for x in rng.normal(size=(20000, 32))])
    assert abs(np.mean(p < 0.05) - 0.05) < 4 * math.sqrt(0.05 * 0.95 / len(p))


def test_settings_are_checked():
    with pytest.raises(DocauditError, match="--samples"):
        ControlsConfig(samples=1)
    with pytest.raises(DocauditError, match="two blocks"):
        ControlsConfig(passages=6, block=4)
    with pytest.raises(DocauditError, match="--stretch-tokens 100 must hold a passage of 144 tokens"):
        ControlsConfig(stretch_tokens=100)
    with pytest.raises(DocauditError, match="--stretch-words 60 must hold a passage of 100 words"):
        ProbeConfig(stretch_words=60)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_bits_per_byte_match_a_plain_forward_pass(name, request):
    """The suffix's −log2 p per byte after its context, against the full softmax row by row (BOS in front for
    the Llama tokenizer, which starts encodings with one)."""
    from docaudit.query.conditional import bits_per_byte
    from docaudit.query.models import load_model
    from docaudit.query.stats import bos_per_window

    lm = load_model(ModelConfig(model=str(request.getfixturevalue(f"tiny_{name}"))))
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=400)
    pairs = [(text[:200], text[200:260]), (text[:50], " and then"), (text[100:300], text[300:])]
    got = bits_per_byte(lm, pairs, batch_size=2)
    bos = bos_per_window(lm.tokenizer)
    for (context, suffix), value in zip(pairs, got):
        left, right = token_ids(lm.tokenizer, context), token_ids(lm.tokenizer, suffix)
        rows = full_softmax_rows(lm.model, left + right, bos)
        bits = -sum(row[y] for row, y in rows[len(left) - 1 :]) / math.log(2)
        assert value == pytest.approx(bits / len(suffix.encode("utf-8")), rel=1e-4)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, one_thread):
    """A tiny target trained on four 600-word book excerpts (80 epochs); those four judged against a null library of 24
    never-trained 600-word excerpts of other books (as long, so each holds the books' layout; smallest p-value 1/25);
    a tiny generator trained on four more books writes the suffixes."""
    from labtarget import TINY, book_excerpt

    from docaudit import api
    from docaudit.lab.target import train_target

    paths = sorted((CORPUS / "members").glob("*.txt"))[:32]
    texts = [book_excerpt(p, 600) for p in paths]
    members, others, library = texts[:4], texts[4:8], texts[8:]
    root = tmp_path_factory.mktemp("controls")
    target = train_target(members, texts, root / "target", replace(TINY, epochs=80))
    generator = train_target(others, others, root / "generator", replace(TINY, epochs=10), context=RunContext(seed=1))
    for name, group in (("books", members), ("library", library)):
        (root / name).mkdir()
        for i, t in enumerate(group):
            (root / name / f"{name}{i:02d}.txt").write_text(t)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DOCAUDIT_CACHE", str(root / "cache"))
        request = api.ControlsRequest(
            [root / "books"],
            ModelConfig(model=str(target)),
            ModelConfig(model=str(generator)),
            library=[root / "library"],
            config=replace(SMALL, passages=24, stretch_tokens=SMALL.passage_tokens),  # passages edge to edge
        )
        result = api.synthetic_controls(request).controls
    return result, len(members)


@pytest.mark.slow
def test_a_trained_book_gets_a_small_p_value(trained_run):
    result, n_members = trained_run
    p = [b.p_value for b in result["books"]]
    compared = [b.library_texts for b in result["books"]]
    assert all(b.contrast is not None for b in result["books"]) and min(compared) >= 20, compared
    assert np.median(p) < 0.05 and max(p) < 0.1, [round(x, 4) for x in p]
    assert any(v.verdict == "evidence of membership" for v in result["verdicts"]), result["verdicts"]


@pytest.mark.slow
def test_a_placebo_is_about_zero_on_trained_books(trained_run):
    """The same trained books with a synthetic suffix in the real one's place: the contrast is about 0 where the
    real suffixes give a large one (that the placebo's rank p-values are uniform is the exchangeability that
    ``test_judge_fires_at_its_level_under_the_null`` checks at the size a doubled rate needs)."""
    result, n_members = trained_run
    books = [b for b in result["books"][:n_members]]
    assert abs(np.mean([b.placebo.mean for b in books])) < 0.1 * np.mean([b.contrast.mean for b in books])


@pytest.fixture(scope="module")
def shelf(tmp_path_factory):
    root = tmp_path_factory.mktemp("shelf")
    shelf_of(root, {"books": ("members", 2)}, n_chars=3000)
    # library texts shorter than the books, yet long enough for every passage (8 stretches of 48 tokens)
    shelf_of(root, {"library": ("nonmembers", 3)}, n_chars=2400)
    return root


def run(args):
    return CliRunner().invoke(main, ["controls", *map(str, args)])


def test_command_outputs_cache_and_schema(shelf, tiny_gpt2, tiny_llama):
    from test_schemas import validate

    args = [shelf / "books", "--model", tiny_llama, "--generator", tiny_gpt2, "--null-library", shelf / "library"]
    args += [*SMALL_ARGS, "--min-library", "3"]
    first = run([*args, "--format", "json"])
    assert first.exit_code == 0, first.output
    out = json.loads(first.output)
    validate(out, "controls")
    assert len(out["books"]) == 2 and len(out["library"]) == 3
    assert all(b["tokens_generated"] == 8 * 3 * 16 and b["tokens_scored"] > 0 for b in out["books"])
    again = json.loads(run([*args, "--format", "json"]).output)
    assert all(b["tokens_generated"] == 0 for b in again["books"])  # the suffixes came from the cache
    assert [b["p_value"] for b in again["books"]] == [b["p_value"] for b in out["books"]]
    info = json.loads(CliRunner().invoke(main, ["cache", "info", "--format", "json"]).output)
    assert info["kinds"]["controls"]["entries"] == 5 and info["other"]["files"] == 0
    stats = info["kinds"]["stats"]["entries"]
    cleared = CliRunner().invoke(main, ["cache", "clear", "--kind", "controls", "--yes"])
    assert cleared.exit_code == 0, cleared.output
    info = json.loads(CliRunner().invoke(main, ["cache", "info", "--format", "json"]).output)
    assert info["kinds"]["controls"]["entries"] == 0 and info["kinds"]["stats"]["entries"] == stats
    assert json.loads(run([*args, "--format", "json"]).output)["books"][0]["tokens_generated"] > 0
    csv = run([*args, "--format", "csv"])
    assert csv.exit_code == 0 and csv.output.splitlines()[0].startswith("file,id,sha256,verdict")
    text = run(args)
    assert text.exit_code == 0 and "contrast" in text.output
    assert "null: the book's contrast is exchangeable with those of never-seen library texts" in text.output
    assert "smallest attainable p-value 0.25" in text.output and "reasons above" in text.output
    assert "passages laid out as the book's (of the library's 3, those long enough to hold them)" in text.output
    assert [b["library_eligible"] for b in out["books"]] == [3, 3]


def test_a_damaged_cache_entry_is_generated_again_and_a_reference_alone_is_inconclusive(shelf, tiny_gpt2, tiny_llama):
    from docaudit.query.cache_entries import entries

    args = [shelf / "books", "--model", tiny_llama, "--generator", tiny_gpt2, "--reference", tiny_gpt2]
    args += [*SMALL_ARGS, "--format", "json"]
    assert run(args).exit_code == 0
    for path in entries("controls"):
        path.write_text("{not json")
    again = run(args)
    assert again.exit_code == 0, again.output
    books = json.loads(again.output)["books"]
    assert all(b["tokens_generated"] > 0 for b in books)
    assert all(b["verdict"] == "inconclusive" and "no null library" in b["reason"] for b in books)
    assert all(b["p_value"] is None and b["contrast"] is not None for b in books)


def test_dry_run_loads_nothing(shelf, tiny_gpt2):
    result = run([shelf / "books", "--model", tiny_gpt2, "--null-library", shelf / "library", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "at most 160 passages in 5 texts" in result.output and "nothing was loaded" in result.output


@pytest.mark.parametrize(
    "extra, status, message",
    [(["--null-library", "MISSING"], 3, "MISSING")],
)
def test_refusals_are_one_line(shelf, tiny_gpt2, extra, status, message):
    result = run([shelf / "books", "--model", tiny_gpt2, *extra])
    assert result.exit_code == status, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_generator_may_be_the_target_only_where_a_library_calibrates(shelf, tiny_gpt2, tiny_llama):
    alone = run([shelf / "books", "--model", tiny_gpt2, "--generator", tiny_gpt2, "--reference", tiny_llama])
    assert alone.exit_code == 3 and "the generator is the target model itself" in alone.output
    args = [shelf / "books", "--model", tiny_gpt2, "--generator", tiny_gpt2, "--null-library", shelf / "library"]
    calibrated = run([*args, *SMALL_ARGS, "--min-library", "3", "--format", "json"])
    assert calibrated.exit_code == 0, calibrated.output
    books = json.loads(calibrated.output)["books"]
    assert all(b["p_value"] is not None and b["library_texts"] == 3 for b in books)


def stored(shelf, models, config, path):
    """The shelf's library texts put through as ``scripts/artifacts/controls_library.py`` does, stored at ``path``."""
    from docaudit.audit.controls_library import library_document, null_key, text_record
    from docaudit.audit.synthetic_controls import examine_book
    from docaudit.corpus.documents import load_documents
    from docaudit.run import DocumentSpec

    docs = load_documents([shelf / "library"])
    texts = [text_record(examine_book(d, models, config, 0), Path(d.path).name, d.sha256) for d in docs]
    path.write_text(json.dumps(library_document(null_key(models, config, DocumentSpec()), {}, texts)))
    return docs


def test_a_stored_library_stands_in_for_its_texts_and_a_mismatch_is_refused(shelf, tiny_gpt2, tiny_llama, tmp_path):
    from docaudit import api
    from docaudit.query.models import load_model

    target, generator = (load_model(ModelConfig(model=str(m))) for m in (tiny_llama, tiny_gpt2))
    config = replace(SMALL, min_library=3)
    docs = stored(shelf, {"generator": generator, "target": target}, config, tmp_path / "library.json")

    def p_values(config, **kw):
        request = api.ControlsRequest([shelf / "books", docs[0].path], target, generator, config=config, **kw)
        return [b.p_value for b in api.synthetic_controls(request).controls["books"]], request

    given, _ = p_values(config, library=[shelf / "library"])
    from_file, request = p_values(config, stored_library=tmp_path / "library.json")
    assert from_file == given and from_file[:2] == given[:2]
    result = api.synthetic_controls(request).controls
    own = result["books"][2]  # the library's own text is left out of its comparison
    assert [b.library_texts for b in result["books"]] == [3, 3, 2] and own.library_eligible == 2
    assert "exchangeable with those of never-seen library texts" in result["null"]
    with pytest.raises(DocauditError, match="does not match this run .it was computed with passages 8, this run uses"):
        p_values(replace(config, passages=12), stored_library=tmp_path / "library.json")
    with pytest.raises(DocauditError, match="its target is"):
        api.synthetic_controls(replace(request, model=generator))


def test_a_stored_library_of_an_earlier_layout_is_refused_in_one_line(tmp_path):
    """A library of an earlier format laid its passages out over each text's whole length, not one per stretch of
    --stretch-tokens, so no book's passages lie as its texts' do: refused with the reason and the way out."""
    from docaudit.audit.controls_library import read_library
    from docaudit.config import CONTROLS_NULL

    data = json.loads(CONTROLS_NULL.read_text())
    data["format"] = 3
    old = tmp_path / "library.json"
    old.write_text(json.dumps(data))
    with pytest.raises(
        DocauditError, match="format 3, not 4: its passages were not laid out one per stretch"
    ) as refused:
        read_library(old, data["key"], 2)
    assert "\n" not in str(refused.value)
    books = read_library(CONTROLS_NULL, data["key"], 2)
    assert [b.tokens for b in books] == [t["tokens"] for t in json.loads(CONTROLS_NULL.read_text())["texts"]]


def test_a_stored_excerpt_is_matched_by_the_whole_text_it_came_from(tmp_path):
    """A library text cut from a book is matched by that book's own SHA-256, so judging the whole book leaves its
    excerpt out of its comparison; an entry without ``source_sha256`` is matched by its own text."""
    from docaudit.audit.controls_library import read_library
    from docaudit.config import CONTROLS_NULL

    data = json.loads(CONTROLS_NULL.read_text())
    assert all(t["source_sha256"] != t["sha256"] for t in data["texts"])  # the shipped texts are excerpts
    books = read_library(CONTROLS_NULL, data["key"], 2)
    assert [b.sha256 for b in books] == [t["source_sha256"] for t in data["texts"]]
    for t in data["texts"]:
        del t["source_sha256"]
    plain = tmp_path / "library.json"
    plain.write_text(json.dumps(data))
    assert [b.sha256 for b in read_library(plain, data["key"], 2)] == [t["sha256"] for t in data["texts"]]


def test_the_shipped_library_is_for_the_embedded_model_at_the_fast_preset():
    """The null ``docaudit controls BOOK`` uses on the embedded model: post-2024 texts of the shared corpus (enough
    for a p-value below ``--alpha``), each named by the SHA-256 of its file, computed at ``--preset
    fast`` with the embedded Gemma as generator and target, with the versions and date."""
    from docaudit.config import CONTROLS_NULL
    from docaudit.inference.verdicts import nonmembers_needed
    from docaudit.untrusted import sha256_untrusted

    data = json.loads(CONTROLS_NULL.read_text())
    settings = {k: v for k, v in ControlsConfig.preset("fast").generation_key(0).items() if k != "seed"}
    assert data["key"]["settings"] == settings and data["key"]["reference"] is None
    assert data["key"]["generator"] == data["key"]["target"]
    assert data["provenance"]["generator_and_target"]["id"] is None  # the embedded model
    assert {"docaudit", "torch", "transformers"} <= set(data["provenance"]["versions"]) and data["provenance"]["date"]
    assert len(data["texts"]) >= nonmembers_needed(ControlsConfig().alpha)  # a p-value below --alpha is reachable
    fast = ControlsConfig.preset("fast")
    # one passage per stretch of 704 tokens after the first 96, up to 16: a text's count follows from its length
    rest = [(t["tokens"] - fast.passage_tokens) // fast.stretch_tokens for t in data["texts"]]
    assert all(len(t["contrasts"]) == t["passages"] == min(16, r) for t, r in zip(data["texts"], rest))
    # a book of 16 passages is compared at 15 consecutive ones, which 20 texts hold (17 hold 16): p down to 1/21
    from docaudit.inference.matched import compared_at

    counts = [t["passages"] for t in data["texts"]]
    needed = nonmembers_needed(ControlsConfig().alpha)
    assert compared_at(fast.passages, counts, needed, 2 * fast.block) == 15 and sum(c >= 15 for c in counts) >= needed
    if CORPUS.present():
        for t in data["texts"]:
            assert sha256_untrusted(CORPUS / "nonmembers" / t["file"], "document") == t["file_sha256"]


def test_without_a_null_the_stored_library_is_used_and_another_model_refused(shelf, tiny_gpt2):
    result = run([shelf / "books", "--model", tiny_gpt2, "--generator", tiny_gpt2])
    assert result.exit_code == 3 and "stored null library" in result.output and "does not match" in result.output
    assert len(result.output.strip().splitlines()) == 1
    fast = run([shelf / "books", "--model", tiny_gpt2, "--dry-run"])
    assert "at most 32 passages in 2 texts; 3,072 tokens generated" in fast.output  # --preset fast


def test_generation_is_seeded(tiny_gpt2):
    from docaudit.query.generate import continuations
    from docaudit.query.models import load_model

    lm = load_model(ModelConfig(model=str(tiny_gpt2)))
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12]]
    options = {"temperature": 1.0, "seed": 3, "batch_size": 3}
    a = continuations(lm, prompts, 2, 5, options)
    assert a == continuations(lm, prompts, 2, 5, options)
    assert [len(r) for rows in a for r in rows] == [5] * 4
    torch.manual_seed(0)


def test_preset_fast_and_explicit_options_win(shelf, tiny_gpt2):
    args = [shelf / "books", "--model", tiny_gpt2, "--null-library", shelf / "library", "--dry-run"]
    fast = run([*args, "--preset", "fast"])
    assert fast.exit_code == 0, fast.output
    assert "at most 80 passages in 5 texts; 7,680 tokens generated" in fast.output  # 5 × 16 passages × 3 × 32
    mixed = run([*args, "--preset", "fast", "--passages", "8"])
    assert "at most 40 passages in 5 texts; 3,840 tokens generated" in mixed.output
    assert ControlsConfig.preset("fast", samples=2).samples == 2
    assert ControlsConfig.preset("default") == ControlsConfig()


@pytest.mark.slow
def test_out_writes_a_page_that_escapes_book_names(shelf, tiny_gpt2, tiny_llama, tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    text = next((shelf / "books").glob("*.txt")).read_text()
    (books / "<img src=x onerror=alert(1)>.txt").write_text(text)
    out = tmp_path / "out"
    args = [books, "--model", tiny_llama, "--generator", tiny_gpt2, "--null-library", shelf / "library"]
    args += [*SMALL_ARGS, "--min-library", "3", "--out", out]
    result = run(args)
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    page = (out / "controls.html").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page
    assert "font-family: system-ui" in page  # the shared head of templates/base.html
    row = json.loads((out / "controls.json").read_text())["books"][0]
    assert f"{row['contrast']:+.4f}" in page and row["verdict"] in page
    assert (out / "controls.csv").read_text().startswith("file,id,sha256,verdict")
    again = run(args)
    assert again.exit_code == 3 and "--overwrite" in again.output
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused = run([*args[:-1], foreign])
    assert refused.exit_code == 3 and (foreign / "notes.txt").read_text() == "mine"


def test_batched_rows_do_not_change_what_is_sampled(tiny_gpt2):
    """Rows of one ``generate`` call have the same length (no padding), so a row's continuation does not depend on
    its batch: at a temperature low enough to be greedy, batches of 1 and of 4 give the same tokens."""
    from docaudit.query.generate import continuations
    from docaudit.query.models import load_model

    lm = load_model(ModelConfig(model=str(tiny_gpt2)))
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    single = continuations(lm, prompts, 2, 6, {"temperature": 1e-4, "seed": 1, "batch_size": 1})
    batched = continuations(lm, prompts, 2, 6, {"temperature": 1e-4, "seed": 2, "batch_size": 4})
    assert single == batched


@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_stored_library_of_another_backend_refused_before_loading(shelf, dry, monkeypatch):
    """The shipped library holds float32 transformers contrasts: through llama.cpp, the dry run and the run refuse
    in one line naming --null-library before any model loads (loading would fail the test)."""
    from docaudit.query import models

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", no_loading)
    result = run([shelf / "books", "--backend", "llamacpp", *dry])
    assert result.exit_code == 3, result.output
    assert "holds contrasts of a float32 generator, not of this run's (llamacpp)" in result.output
    assert "--null-library DIR" in result.output and len(result.output.strip().splitlines()) == 1
