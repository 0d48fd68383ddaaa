"""Options and inputs: one rule for --context / --stride / --max-tokens in every command, excerpts bounded by their
size (not the document's), the document size limit, strict JSON and clear errors for bad values and files."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS, corpus_ids, corpus_text, document_sets
from test_cli import assert_clean_error, run

from docaudit.config import MAX_DOCUMENT_BYTES, QueryConfig
from docaudit.corpus.cleaning import clean_text
from docaudit.corpus.documents import DocumentError, Skips, load_documents, read_text
from docaudit.errors import DocauditError
from docaudit.io import json_text
from docaudit.query.models import load_model
from docaudit.query.querier import Querier, excerpt

REPO = Path(__file__).resolve().parents[1]


def strict_json(text: str):
    """Parse JSON refusing NaN and infinities (which are not JSON)."""

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def make_sentencepiece_like(out: Path) -> Path:
    """A tiny GPT-2 whose tokenizer works like Gemma's: spaces become '▁' and BPE runs over the whole text (no
    pre-tokenizer), so tokenizing a long text costs far more than its length."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [corpus_text("members", b) for b in corpus_ids("members", 4)]
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<s>"] + [f"<0x{i:02X}>" for i in range(256)],
        initial_alphabet=sorted(set("".join(texts).replace(" ", "\u2581"))),
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<s>")
    torch.manual_seed(0)
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(fast), n_positions=256, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
        )
    ).save_pretrained(out)
    fast.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    return make_sentencepiece_like(tmp_path_factory.mktemp("spm"))


@pytest.fixture()
def docs(tmp_path):
    return document_sets(tmp_path, n_chars=1500)


# ---------------------------------------------------------------------------------------------------------------
# one rule for --context and --stride


def test_query_config_refuses_out_of_range_values():
    for kwargs, message in [
        ({"context": 64, "stride": 100}, "--stride 100 is out of range: allowed 1..63 (for --context 64)"),
        ({"context": 64, "stride": 0}, "--stride 0 is out of range: allowed 1..63"),
        ({"context": 1}, "--context 1 is out of range: allowed 2.."),
        ({"max_tokens": 0}, "--max-tokens 0 is out of range: allowed 2.."),
        ({"max_tokens": -1}, "--max-tokens -1 is out of range"),
        ({"max_tokens": 1}, "--max-tokens 1 is out of range"),
        ({"batch_size": 0}, "--batch-size 0 is out of range"),
        ({"excerpt": "middle"}, "unknown excerpt mode"),
    ]:
        with pytest.raises(DocauditError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            QueryConfig(**kwargs)
    with pytest.raises(DocauditError, match=r"--context 257 is out of range: allowed 2\.\.256 \(why\)"):
        QueryConfig(context=257).check(256, "why")
    assert QueryConfig(context=256).check(256).context == 256


def test_querier_counts_the_bos_position(tiny_gpt2, tiny_llama):
    from docaudit.config import ModelConfig

    assert Querier(load_model(ModelConfig(model=str(tiny_gpt2))), QueryConfig(context=256)).query.context == 256
    llama = load_model(ModelConfig(model=str(tiny_llama)))
    with pytest.raises(
        DocauditError,
        match=r"--context 256 is out of range: allowed 2\.\.255 \(the model takes 256 "
        r"positions, one of them for the BOS token\)",
    ):
        Querier(llama, QueryConfig(context=256))


BAD_QUERIES = [
    (["--context", "257"], "--context 257 is out of range: allowed 2..256 (the model takes 256 positions)"),
    (["--context", "100000"], "--context 100000 is out of range: allowed 2..256"),
    (["--context", "64", "--stride", "100"], "--stride 100 is out of range: allowed 1..63 (for --context 64)"),
]


@pytest.mark.parametrize("command", ["score", "evaluate", "train", "dataset-test"])
@pytest.mark.parametrize("options,message", BAD_QUERIES)
def test_every_command_refuses_the_same_bad_values(command, options, message, docs, tiny_gpt2, tmp_path):
    args = {
        "score": ["score", docs["mem"]],
        "evaluate": [
            "evaluate",
            "--members",
            docs["mem"],
            "--nonmembers",
            docs["non"],
            "--methods",
            "loss",
            "--no-meta",
            "--folds",
            "2",
        ],
        "train": [
            "train",
            "--members",
            docs["mem"],
            "--nonmembers",
            docs["non"],
            "--folds",
            "2",
            "--norm",
            "ratio_tf",
            "--features",
            "hist",
            "--out",
            tmp_path / "o",
        ],
        "dataset-test": ["dataset-test", "--suspect", docs["mem"], "--nonmembers", docs["non"]],
    }[command]
    result = run(*args, "--model", tiny_gpt2, *options)
    assert_clean_error(result, message)
    assert result.stdout == "" and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_report_checks_max_context_and_shows_the_context_used(docs, tiny_gpt2, tmp_path):
    base = [
        "report",
        docs["mem"] / f"{corpus_ids('members', 1)[0]}.txt",
        "--calibrate-members",
        docs["mem"],
        "--calibrate-nonmembers",
        docs["non"],
        "--model",
        tiny_gpt2,
        "--snippets",
        "2",
        "--snippet-words",
        "30",
        "--out",
        tmp_path / "rep",
    ]
    assert_clean_error(run(*base, "--max-context", "1"), "--max-context 1 is out of range: allowed 2..")
    result = run(*base, "--max-context", "100000")
    assert result.exit_code == 0, result.output
    assert "snippets scored with context 256 (stride 255)" in result.stdout
    info = strict_json((tmp_path / "rep" / "report.json").read_text())["info"]
    assert (info["context"], info["stride"]) == (256, 255)


@pytest.mark.slow
def test_values_used_appear_in_every_output(docs, tiny_gpt2, tmp_path):
    query = ["--context", "64", "--stride", "32"]
    rows = strict_json(
        run("score", "--model", tiny_gpt2, "--methods", "loss", *query, "--format", "json", docs["mem"]).stdout
    )["rows"]
    assert {(r["context"], r["stride"]) for r in rows} == {(64, 32)}

    common = ["--members", docs["mem"], "--nonmembers", docs["non"], "--model", tiny_gpt2, *query, "--folds", "2"]
    ev = run("evaluate", *common, "--methods", "loss", "--no-meta", "--no-blind")
    assert ev.exit_code == 0 and "query: context 64, stride 32, max tokens all" in ev.stdout
    info = strict_json(
        run("evaluate", *common, "--methods", "loss", "--no-meta", "--no-blind", "--format", "json").stdout
    )["info"]
    assert (info["query"]["context"], info["query"]["stride"]) == (64, 32)

    fast = ["--trees", "10", "--bins", "20", "--norm", "max_tf", "--features", "hist"]
    tr = run("train", *common, *fast, "--out", tmp_path / "clf")
    assert tr.exit_code == 0 and "query: context 64, stride 32, max tokens all" in tr.stdout
    card = strict_json((tmp_path / "clf" / "card.json").read_text())
    assert (card["query"]["context"], card["query"]["stride"]) == (64, 32)

    ds = [
        "dataset-test",
        "--suspect",
        docs["mem"],
        "--nonmembers",
        docs["non"],
        "--model",
        tiny_gpt2,
        *query,
        "--methods",
        "loss",
        "--splits",
        "2",
    ]
    assert "query: context 64, stride 32" in run(*ds).stdout
    out = strict_json(run(*ds, "--format", "json").stdout)
    assert (out["query"]["context"], out["query"]["stride"]) == (64, 32) and out["skipped"] == []


# ---------------------------------------------------------------------------------------------------------------
# excerpts bounded by their size


def test_excerpt_equals_a_slow_reference(tiny_gpt2, spm_model):
    """The excerpt is the first max_tokens tokens of the text from a seeded start (a word's leading whitespace):
    tokenizing only a span gives exactly the tokens of the whole suffix, and, with a tokenizer that splits words
    first (GPT-2 style), exactly the tokens of the whole document from that point."""
    from transformers import AutoTokenizer

    book = (CORPUS / "members" / f"{corpus_ids('members', 3)[2]}.txt").read_text(encoding="utf-8")[:40_000]
    sha = "5" * 64
    for path, whole_text_equal in ((tiny_gpt2, True), (spm_model, False)):
        tok = AutoTokenizer.from_pretrained(path)
        whole = tok(book, add_special_tokens=False, return_offsets_mapping=True)
        for seed in range(12):
            for m in (2, 40, 600):
                e = excerpt(tok, book, m, "random", seed, sha)
                assert len(e.ids) == m and 0 < e.start < e.end <= len(book)
                assert e.ids.tolist() == tok(book[e.start :], add_special_tokens=False)["input_ids"][:m]
                assert tok(book[e.start : e.end], add_special_tokens=False)["input_ids"] == e.ids.tolist()
                if whole_text_equal:
                    first = next(i for i, (_, b) in enumerate(whole["offset_mapping"]) if b > e.start)
                    assert e.ids.tolist() == whole["input_ids"][first : first + m]
        lead = excerpt(tok, book, 600, "leading", 0, sha)
        assert lead.ids.tolist() == whole["input_ids"][:600] and lead.start == 0
        starts = {excerpt(tok, book, 40, "random", seed, sha).start for seed in range(12)}
        assert len(starts) > 8  # seeded, and spread over the document


MEASURE = """
import json, resource, sys
from click.testing import CliRunner
from docaudit.cli import main
def score(path):
    args = ["score", "--model", sys.argv[1], "--max-tokens", "512", "--raw", "--format", "json", path]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"][0]
score(sys.argv[2])  # imports, model and tokenizer loaded: the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
row = score(sys.argv[3])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"mb": (peak - base) / 1024, "n_tokens": row["n_tokens"]}))
"""


@pytest.mark.slow
def test_large_document_with_max_tokens_is_bounded_by_the_excerpt(spm_model, tmp_path):
    """A 50 MB document with --max-tokens 512 (with a tokenizer whose cost grows faster than the text, as Gemma's):
    only spans around the excerpt are tokenized and every method scores the excerpt. Measured on 2 busy cores:
    about 2 s and 300 MB over the baseline (the text itself: 50 MB read, 200 MB as a Python string); tokenizing
    the whole text instead took 300 s and 1.6 GB for 10 MB. (``--raw``: cleaning reads the text whole and adds
    about 20 s and 0.5 GB here, whatever the excerpt.)"""
    book = "\n\n".join(
        clean_text((CORPUS / g / f"{b}.txt").read_text(encoding="utf-8"))
        for g in ("members", "nonmembers")
        for b in corpus_ids(g, 3)
    )
    big = tmp_path / "big.txt"
    with open(big, "w", encoding="utf-8") as f:
        f.writelines(book for _ in range(50_000_000 // len(book) + 1))
    assert big.stat().st_size >= 50_000_000
    small = tmp_path / "small.txt"
    small.write_text(book[:20_000])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(spm_model), str(small), str(big)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,  # a hang guard, not a speed claim: tokenizing the whole text would take far longer
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["n_tokens"] == 512
    assert measured["mb"] < 1024, measured


def test_document_size_limit(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: no disk space used, nothing read
    with pytest.raises(DocumentError, match=f"huge.txt: {MAX_DOCUMENT_BYTES + 1:,} bytes, over the limit"):
        read_text(huge)
    (tmp_path / "ok.txt").write_text("A short but fine document.")
    skips = Skips()
    assert [d.id for d in load_documents([tmp_path], skips=skips)] == ["ok"]
    assert [(s["file"], s["kind"]) for s in skips.as_json()] == [(str(huge), "too large")]


# ---------------------------------------------------------------------------------------------------------------
# clear errors for bad values and files


@pytest.mark.parametrize("value", ["0", "-1", "1"])
def test_max_tokens_checked_before_anything_is_loaded(value, tmp_path):
    (tmp_path / "a.txt").write_text("Some text to score.")
    assert_clean_error(
        run("score", "--model", tmp_path / "no-such-model", "--max-tokens", value, tmp_path / "a.txt"),
        f"--max-tokens {value} is out of range: allowed 2..",
    )
    assert_clean_error(
        run("train", "--members", tmp_path, "--nonmembers", tmp_path, "--max-tokens", value, "--out", tmp_path / "o"),
        f"--max-tokens {value} is out of range",
    )


def test_detector_options_checked_and_json_has_no_nan(tiny_gpt2, tmp_path):
    doc = tmp_path / "a.txt"
    doc.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=800))
    assert_clean_error(
        run("score", "--model", tiny_gpt2, "--pac-copies", "0", doc),
        "--pac-copies 0 is out of range: allowed 1..",
    )
    assert_clean_error(run("score", "--model", tiny_gpt2, "--k", "0", doc), "--k 0.0 is out of range")
    result = run("score", "--model", tiny_gpt2, "--context", "64", "--pac-copies", "1", "--format", "json", doc)
    assert result.exit_code == 0 and math.isfinite(strict_json(result.stdout)["rows"][0]["pac"])
    assert strict_json(json_text({"a": float("nan"), "b": [np.float32("inf"), 1.5]})) == {"a": None, "b": [None, 1.5]}


def test_too_short_document_names_the_file(tiny_gpt2, tmp_path):
    doc = tmp_path / "tiny.txt"
    doc.write_text("a")
    assert_clean_error(run("score", "--model", tiny_gpt2, doc), "tiny.txt: too short: 1 token")


def test_symlink_loop_and_broken_link_are_named(tmp_path):
    os.symlink("loop.txt", tmp_path / "loop.txt")
    assert_clean_error(run("score", tmp_path / "loop.txt"), "loop.txt: symlink loop")
    os.symlink("missing-target.txt", tmp_path / "broken.txt")
    assert_clean_error(run("score", tmp_path / "broken.txt"), "broken.txt: broken symlink")
    (tmp_path / "ok.txt").write_text("A document that can be read.")
    skips = Skips()
    assert [d.id for d in load_documents([tmp_path], skips=skips)] == ["ok"]
    assert {os.path.basename(s["file"]): s["reason"].split(" (")[0] for s in skips.as_json()} == {
        "loop.txt": "symlink loop",
        "broken.txt": "broken symlink",
    }


def test_lab_refuses_positions_beyond_the_base_model(tiny_gpt2, tmp_path):
    from docaudit.config import TargetConfig
    from docaudit.lab.target import train_target

    texts = [corpus_text("members", b, n_chars=800) for b in corpus_ids("members", 2)]
    with pytest.raises(
        DocauditError, match=r"--positions 300 is out of range: allowed 2\.\.256 \(the base model takes 256"
    ):
        train_target(
            texts,
            texts,
            tmp_path / "lab",
            TargetConfig(positions=300, epochs=1),
            base_model=str(tiny_gpt2),
        )
