"""``controls``: the paired synthetic-control test. Its statistics against slow references and null simulations,
bits per byte against a plain forward pass, the placebo and a trained book on a tiny target, the command's outputs,
cache and refusals."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import CORPUS, corpus_ids, corpus_text
from reference import full_softmax_rows, token_ids

from docaudit.cli import main
from docaudit.config import ControlsConfig, ModelConfig
from docaudit.errors import DocauditError
from docaudit.inference.controls import block_mean, contrasts, library_p_value
from docaudit.run import RunContext

SMALL = ControlsConfig(
    passages=8, context_tokens=8, prefix_tokens=8, suffix_tokens=16, samples=3, block=2, min_library=10
)
SMALL_ARGS = ["--passages", "8", "--context-tokens", "8", "--prefix-tokens", "8", "--suffix-tokens", "16"]
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


def test_library_p_value_is_uniform_under_the_null():
    """A new draw from the library's (normal) distribution: p < alpha at rate alpha (20,000 repetitions, so a rate
    of 0.055 would be seen: binomial sd 0.0015)."""
    rng = np.random.default_rng(0)
    p = np.array([library_p_value(x[0], x[1:]) for x in rng.normal(3.0, 2.0, size=(20000, 11))])
    for alpha in (0.01, 0.05, 0.2):
        assert abs(np.mean(p < alpha) - alpha) < 4 * math.sqrt(alpha * (1 - alpha) / len(p))


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
    """A tiny target trained on four 600-word book excerpts; those four judged against a null library of ten
    never-trained excerpts of other books; a tiny generator trained on four more books writes the suffixes."""
    from labtarget import TINY, book_excerpt

    from docaudit import api
    from docaudit.lab.target import train_target

    paths = sorted((CORPUS / "members").glob("*.txt"))[:18]
    texts = [book_excerpt(p, 600) for p in paths]
    members, others, library = texts[:4], texts[4:8], texts[8:]
    root = tmp_path_factory.mktemp("controls")
    target = train_target(members, texts, root / "target", TINY)
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
            config=replace(SMALL, passages=24),  # 16 gave a median p of 0.08 to 0.002 across seeds 0-3
        )
        result = api.synthetic_controls(request).controls
    return result, len(members)


@pytest.mark.slow
def test_a_trained_book_gets_a_small_p_value(trained_run):
    result, n_members = trained_run
    p = [b.p_value for b in result["books"]]
    assert all(b.contrast is not None for b in result["books"])
    assert np.median(p) < 0.05 and max(p) < 0.1, [round(x, 4) for x in p]
    assert any(v.verdict == "evidence of membership" for v in result["verdicts"]), result["verdicts"]


@pytest.mark.slow
def test_a_placebo_gives_no_evidence(trained_run):
    """The same trained books with a synthetic suffix in the real one's place: the contrast is about 0 and no
    book gets evidence, where the real suffixes give it."""
    from docaudit.audit.synthetic_controls import judge

    result, n_members = trained_run
    books = [b for b in result["books"][:n_members]]
    placebos = [type(b)(b.id, b.path, b.sha256, b.passages, contrast=b.placebo, placebo=b.placebo) for b in books]
    verdicts = judge(placebos, result["library"], SMALL)
    assert all(v.verdict == "no evidence of membership" for v in verdicts), [v.p_value for v in verdicts]
    assert abs(np.mean([b.placebo.mean for b in books])) < 0.1 * np.mean([b.contrast.mean for b in books])


@pytest.fixture(scope="module")
def shelf(tmp_path_factory):
    root = tmp_path_factory.mktemp("shelf")
    for group, name, n in (("members", "books", 2), ("nonmembers", "library", 3)):
        (root / name).mkdir()
        for book in corpus_ids(group, n):
            (root / name / f"{book}.txt").write_text(corpus_text(group, book, n_chars=3000))
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
    assert text.exit_code == 0 and "contrast" in text.output and "null: t prediction interval" in text.output


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
    [
        ([], 3, "need a null"),
        (
            ["--backend", "openai", "--api-base", "http://127.0.0.1:9/v1", "--api-model", "m", "--reference", "x"],
            4,
            "chat-only API cannot score",
        ),
        (["--null-library", "MISSING"], 3, "MISSING"),
    ],
)
def test_refusals_are_one_line(shelf, tiny_gpt2, extra, status, message):
    result = run([shelf / "books", "--model", tiny_gpt2, *extra])
    assert result.exit_code == status, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_generator_may_not_be_the_target(shelf, tiny_gpt2):
    result = run([shelf / "books", "--model", tiny_gpt2, "--generator", tiny_gpt2, "--reference", tiny_gpt2])
    assert result.exit_code == 3 and "is the target model itself" in result.output


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
