"""``extract``: p_z as the authors compute it (their ``compute_logprob_batch``, tests/reference_extraction.py) on
the same examples through tiny models, and the summaries built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import corpus_ids, corpus_text
from reference_extraction import CONFIGS, apply_temperature_and_topk, compute_logprob_batch

from docaudit.config import ModelConfig
from docaudit.query.extraction import example_starts, position_logp, pz
from docaudit.query.models import load_model
from docaudit.query.stats import bos_per_window

PREFIX, SUFFIX = 50, 50


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Tiny models: one torch thread (far faster on a shared, busy machine)."""


def _continue(model, context: list[int], k: int, generator: torch.Generator) -> list[int]:
    """``SUFFIX`` tokens after ``context``, each the argmax (k = 1) or drawn from the top-k softmax."""
    ids = list(context)
    for _ in range(SUFFIX):
        logits = model(torch.tensor([ids])).logits[0, -1]
        if k == 1:
            ids.append(int(logits.argmax()))
        else:
            top = torch.topk(logits, k)
            ids.append(int(top.indices[torch.multinomial(top.values.softmax(0), 1, generator=generator)]))
    return ids[len(context) :]


def _book(lm) -> np.ndarray:
    """A real text's ids in which the suffix of the example at 0 is the model's greedy continuation of its prefix
    and that of the example at 200 a top-40 sample of its prefix's continuation: one greedy-extractable example, one
    only discoverable under sampling, the rest the real text."""
    text = " ".join(corpus_text("members", b, n_chars=3000) for b in corpus_ids("members", 2))
    ids = np.asarray(lm.tokenizer(text, add_special_tokens=False).input_ids[:420], dtype=np.int64)
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for start, k in ((0, 1), (200, 40)):
            ids[start + PREFIX : start + PREFIX + SUFFIX] = _continue(
                lm.model, head + ids[start : start + PREFIX].tolist(), k, g
            )
    return ids


def _reference(lm, ids: np.ndarray, starts: np.ndarray, temperature: float, k: int) -> np.ndarray:
    """The authors' log p_z of each example: their function on the model's logits, taken to float64 (their own
    float32 log-softmax is off by about 1e-6 over 50 tokens, the tolerance asked)."""
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    rows = torch.tensor([head + ids[s : s + PREFIX + SUFFIX].tolist() for s in starts])
    with torch.inference_mode():
        logits = lm.model(input_ids=rows).logits.double()
    inputs = {"input_ids": rows, "attention_mask": torch.ones_like(rows)}
    logp, _ = compute_logprob_batch(inputs, logits, [rows.shape[1] - SUFFIX] * len(rows), temperature, k)
    return np.array(logp)


def _agree(mine: np.ndarray, theirs: np.ndarray) -> None:
    assert np.array_equal(np.isneginf(mine), np.isneginf(theirs)), (mine, theirs)
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(mine[finite], theirs[finite], rtol=0, atol=1e-6)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_pz_agrees_with_the_authors_code(arch, request):
    lm = load_model(ModelConfig(model=str(request.getfixturevalue(f"tiny_{arch}")), device="cpu"))
    ids = _book(lm)
    starts = example_starts(len(ids), PREFIX + SUFFIX, 10)
    [greedy_config, top_config] = CONFIGS
    mine = pz(lm, ids, starts, PREFIX, SUFFIX, (top_config["k"], top_config["temperature"], 7))
    greedy = _reference(lm, ids, starts, greedy_config["temperature"], greedy_config["k"])
    sampled = _reference(lm, ids, starts, top_config["temperature"], top_config["k"])
    _agree(mine.greedy, greedy)
    _agree(mine.sampled, sampled)
    # the constructed examples: greedy p_z 1 at 0, a finite top-40 p_z at 200 and not greedy there
    assert mine.greedy[0] == 0.0 and np.isfinite(mine.sampled[0])
    assert np.isfinite(mine.sampled[20]) and np.isneginf(mine.greedy[20])
    assert np.isneginf(mine.sampled).sum() > len(starts) // 2  # the real text is rarely in a random model's top 40
    # another temperature and k
    hot = pz(lm, ids, starts, PREFIX, SUFFIX, (5, 0.7, 16))
    _agree(hot.sampled, _reference(lm, ids, starts, 0.7, 5))


@pytest.mark.parametrize(("k", "temperature"), [(1, 1.0), (3, 1.0), (4, 0.5), (40, 1.3)])
def test_ties_and_temperature_follow_the_authors_code(k, temperature):
    """Integer logits tie often: the tokens tied with the k-th are all kept, each sharing the probability."""
    g = torch.Generator().manual_seed(k)
    logits = torch.randint(-3, 3, (6, 12, 50), generator=g).float()
    ids = torch.randint(0, 50, (6, 12), generator=g)
    ids[0, 1:] = logits[0, :-1].argmax(1)  # one row whose every token is an argmax
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    theirs = np.array(compute_logprob_batch(inputs, logits, [6] * 6, temperature, k)[0])
    z = logits[:, 5:11].reshape(-1, 50)
    greedy, sampled = position_logp(z, ids[:, 6:12].reshape(-1), k, temperature)
    mine = (greedy if k == 1 else sampled).view(6, 6).sum(1).numpy()
    _agree(mine, theirs)
    if k == 1:  # greedy p_z is 1/m per position where the token ties with m - 1 others
        ties = (logits[0, 5:11] == logits[0, 5:11].max(1, keepdim=True).values).sum(1)
        assert mine[0] == pytest.approx(-float(torch.log(ties.double()).sum()))


def test_the_reference_masks_as_documented():
    """The port itself: top-k keeps the logits tied with the k-th, and drops the rest to -inf."""
    z = torch.tensor([[[3.0, 1.0, 1.0, 0.0]]])
    kept = apply_temperature_and_topk(z, 1.0, 2)
    assert torch.isinf(kept[0, 0, 3]) and not torch.isinf(kept[0, 0, 2])
    assert math.isclose(
        float(torch.log_softmax(kept, -1)[0, 0, 1]), 1.0 - math.log(math.exp(3) + 2 * math.e), rel_tol=1e-6
    )


def _slow_share(starts, log_pz, offset, length, n_tokens, n, p) -> tuple[float, int]:
    """The extractable share and the longest run, token by token: whether each token lies in the suffix of an
    example whose 1 - (1 - p_z)^n reaches p."""
    inside = [False] * n_tokens
    for start, value in zip(starts, log_pz):
        if value != -math.inf and 1 - (1 - math.exp(value)) ** n >= p:
            for t in range(start + offset, start + offset + length):
                inside[t] = True
    longest = run = 0
    for flag in inside:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    return sum(inside) / n_tokens, longest


@pytest.mark.parametrize("n", [1, 3])
def test_the_shares_and_the_longest_run_agree_with_a_token_by_token_count(n):
    from docaudit.audit.extraction import TextExtraction, summarize
    from docaudit.config import ExtractConfig
    from docaudit.corpus.base import Document
    from docaudit.query.extraction import Pz

    rng = np.random.default_rng(n)
    n_tokens = 1000
    config = ExtractConfig(prefix_tokens=20, suffix_tokens=15, stride=4, n=n, p=0.01)
    starts = example_starts(n_tokens, config.example_tokens, config.stride)
    sampled = np.where(rng.random(len(starts)) < 0.2, np.log(rng.uniform(0.001, 0.05, len(starts))), -np.inf)
    greedy = np.where(rng.random(len(starts)) < 0.1, 0.0, -np.inf)
    offsets = np.stack([np.arange(n_tokens) * 3, np.arange(n_tokens) * 3 + 2], axis=1)
    doc = Document("b", "b.txt", "x" * 3000, "0" * 64)
    text = TextExtraction(doc, "judged", starts, Pz(greedy, sampled), offsets, n_tokens)
    summarize(text, config)
    share, longest = _slow_share(starts, sampled, 20, 15, n_tokens, n, config.p)
    assert 0 < share < 1
    assert text.summary["extractable_share"] == pytest.approx(share, abs=1e-12)
    assert text.summary["longest_run_tokens"] == longest
    assert text.summary["greedy_share"] == pytest.approx(_slow_share(starts, greedy, 20, 15, n_tokens, 1, 1.0)[0])
    assert text.passages[0]["token_end"] - text.passages[0]["token_start"] == longest
    assert text.summary["max_pz"] == pytest.approx(float(np.exp(sampled.max())))


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """A book (a real text's slice) and three never-seen texts."""
    root = tmp_path_factory.mktemp("extract_texts")
    (root / "book.txt").write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=2500), "utf-8")
    (root / "library").mkdir()
    for i, book in enumerate(corpus_ids("nonmembers", 3)):
        (root / "library" / f"{i}.txt").write_text(corpus_text("nonmembers", book, n_chars=2000), "utf-8")
    return root


def test_extract_prints_and_writes_valid_outputs(texts, tiny_gpt2, tmp_path):
    import json

    import pandas as pd
    from click.testing import CliRunner
    from test_schemas import validate

    from docaudit.cli import main

    args = ["extract", str(texts / "book.txt"), "--null-library", str(texts / "library"), "--model", str(tiny_gpt2)]
    args += ["--raw", "--stride", "25"]
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    assert "never-seen texts: median" in shown.stdout and "member" not in shown.stdout.replace("members", "")
    printed = CliRunner().invoke(main, [*args, "--format", "json"])
    output = json.loads(printed.stdout)
    validate(output, "extract")
    [book] = output["books"]
    assert book["baseline"]["texts"] == 3 and len(output["library"]) == 3
    assert [i["role"] for i in output["inputs"]] == ["judged", "library", "library", "library"]
    written = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out")])
    assert written.exit_code == 0, written.output
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {
        "extract.json",
        "extract.csv",
        "extract.png",
        "extract.html",
    }
    validate(json.loads((tmp_path / "out" / "extract.json").read_text("utf-8")), "extract")
    rows = pd.read_csv(tmp_path / "out" / "extract.csv")
    assert len(rows) == book["examples"] + sum(t["examples"] for t in output["library"])
    # p_z = 0 is a null log p_z beside its flag, never -inf in the output
    assert rows.pz_zero.any() and rows.log_pz[rows.pz_zero].isna().all() and rows.log_pz[~rows.pz_zero].notna().all()
    assert "Infinity" not in (tmp_path / "out" / "extract.json").read_text("utf-8")
    assert "never-seen texts" in (tmp_path / "out" / "extract.html").read_text("utf-8")


def test_extract_refuses_bad_input_in_one_line(texts, tiny_gpt2, tmp_path):
    from click.testing import CliRunner

    from docaudit.cli import main
    from docaudit.errors import BAD_INPUT, MODEL_UNAVAILABLE

    (tmp_path / "tiny.txt").write_text("Only a few words here.", "utf-8")
    book, model = str(texts / "book.txt"), ["--model", str(tiny_gpt2), "--raw"]
    cases = [
        ([str(tmp_path / "tiny.txt"), *model], BAD_INPUT, "fewer than one example"),
        ([book, *model, "--stride", "0"], BAD_INPUT, "--stride 0"),
        ([book, *model, "--stride", "-3"], BAD_INPUT, "--stride -3"),
        ([book, *model, "--prefix-tokens", "300"], BAD_INPUT, "longer than the model's 256 positions"),
        ([book, *model, "--max-tokens", "100"], BAD_INPUT, "more than --max-tokens 100"),
        (
            [book, "--backend", "openai", "--model", "http://127.0.0.1:9/v1#m", "--api-logprobs", "logit_bias"],
            MODEL_UNAVAILABLE,
            "--mode continuation",
        ),
    ]
    for args, status, words in cases:
        result = CliRunner().invoke(main, ["extract", *args])
        assert result.exit_code == status, (args, result.output)
        assert words in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_dry_run_counts_the_examples_before_any_model_loads(texts, tmp_path):
    from click.testing import CliRunner

    from docaudit.cli import main

    result = CliRunner().invoke(main, ["extract", str(texts / "book.txt"), "--model", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "examples" in result.output and "nothing was loaded" in result.output


def test_llamacpp_gives_the_p_z_of_transformers_on_the_same_weights(tmp_path, tiny_llama):
    """A float32 GGUF of the tiny Llama through llama.cpp: the same examples, the same p_z up to the two
    libraries' float32 kernels (the backends' tolerance)."""
    pytest.importorskip("llama_cpp")
    from test_gguf import write_gguf

    hf = load_model(ModelConfig(model=str(tiny_llama), device="cpu"))
    cpp = load_model(ModelConfig(model=str(write_gguf(tiny_llama, tmp_path / "tiny.gguf")), backend="llamacpp"))
    ids = _book(hf)
    assert (
        cpp.tokenizer(" a b", add_special_tokens=False).input_ids
        == hf.tokenizer(" a b", add_special_tokens=False).input_ids
    )
    starts = example_starts(len(ids), PREFIX + SUFFIX, 20)
    ours = pz(cpp, ids, starts, PREFIX, SUFFIX, (40, 1.0, 4))
    theirs = pz(hf, ids, starts, PREFIX, SUFFIX, (40, 1.0, 4))
    for a, b in ((ours.greedy, theirs.greedy), (ours.sampled, theirs.sampled)):
        assert np.array_equal(np.isneginf(a), np.isneginf(b))
        np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], atol=1e-3)
    assert ours.greedy[0] == 0.0 and np.isfinite(ours.sampled[10])


def test_llamacpp_side_by_side_gives_each_example_its_own_logits(tmp_path, tiny_llama, monkeypatch):
    """Examples decoded side by side, in groups of 3 and of 1 (a group ends mid-run), give every suffix row the
    logits of that example decoded alone with every position's logits computed (float32 GGUF)."""
    pytest.importorskip("llama_cpp")
    from test_gguf import write_gguf

    from docaudit.query.backends import llama_rows
    from docaudit.query.models import opened_backend

    cpp = load_model(ModelConfig(model=str(write_gguf(tiny_llama, tmp_path / "tiny.gguf")), backend="llamacpp"))
    ids = _book(load_model(ModelConfig(model=str(tiny_llama), device="cpu")))
    windows = [[1] + ids[s : s + PREFIX + SUFFIX].tolist() for s in range(0, 70, 10)]
    backend = opened_backend(cpp, len(windows[0]))
    alone = [backend.logits(w, slice(len(w) - SUFFIX - 1, len(w) - 1)) for w in windows]
    for rows in (3 * SUFFIX, SUFFIX):
        monkeypatch.setattr(llama_rows, "SUFFIX_ROWS", rows)
        seen = []
        for group, logits in backend.suffix_logits(windows, SUFFIX):
            assert len(group) == rows // SUFFIX or group.stop == len(windows)
            seen += list(group)
            for j, i in enumerate(group):
                np.testing.assert_allclose(logits[j], alone[i], atol=1e-4)
        assert seen == list(range(len(windows)))


def test_a_second_run_reads_the_cache_and_a_damaged_entry_is_a_miss(texts, tiny_gpt2, tmp_path, monkeypatch):
    import docaudit.query.extraction as extraction
    from docaudit import api
    from docaudit.config import ExtractConfig
    from docaudit.query.cache_entries import entries
    from docaudit.run import DocumentSpec

    monkeypatch.setattr(extraction, "CHUNK_EXAMPLES", 16)
    request = api.ExtractRequest(
        [texts / "book.txt"], ModelConfig(model=str(tiny_gpt2), device="cpu"), config=ExtractConfig(stride=7),
        reading=DocumentSpec(raw=True),
    )  # fmt: skip
    first = api.extract_books(request)
    found = entries("extraction")
    assert len(found) == -(-first.books[0].examples // 16) > 1
    (found[0]).write_text('{"format": 1, "key": "x", "greedy": [1.0], "sampled": []}', "utf-8")
    (found[1]).write_text("not json", "utf-8")
    runs = []
    real = extraction.pz
    monkeypatch.setattr(extraction, "pz", lambda *a: runs.append(len(a[2])) or real(*a))
    second = api.extract_books(request)
    assert runs == [16, 16]  # only the two damaged chunks ran again
    assert second.rows == first.rows and second.books == first.books
