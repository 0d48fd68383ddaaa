"""``extract`` through servers on 127.0.0.1. p_z from llama-cpp-python's echoed prompt log-probabilities equals the
local transformers p_z on the same weights (a float32 GGUF of a tiny Llama whose tokens that are not whole
characters, which the server would list under one shared text, never reach the top 41); a server listing fewer
log-probabilities than top-k needs, none, malformed ones or a context too short is refused in one line.
Extraction by continuation against the server with its completions routes removed (chat only): stopped by
--max-requests, resumed from the cache, its figures recomputed from the cached answers by brute force."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import CORPUS, make_model
from hostile import hostile_server
from test_cli import assert_clean_error, run
from test_extract_continuation import brute_longest

pytest.importorskip("llama_cpp.server.app")

from test_backends_openai import KEY_ENV, _serve, api_key, server  # noqa: E402, F401 (fixtures)
from test_gguf import write_gguf  # noqa: E402

from docaudit.config import ModelConfig  # noqa: E402
from docaudit.errors import MODEL_UNAVAILABLE  # noqa: E402
from docaudit.query.extraction import example_starts, pz  # noqa: E402
from docaudit.query.models import load_model  # noqa: E402

TOLERANCE = 1e-4  # log p_z over 50 positions: measured at most 1e-5 (float32 log-probabilities, llama.cpp's kernels)


def distinct_model(directory):
    """The tiny Llama, its tokens that are no whole character on their own (bytes of a longer UTF-8 character,
    listed by the server under one text) given the lowest logits: dimension 0 of the residual stream is held at a
    positive constant (no layer writes it) and only those tokens' LM-head rows read it, negatively."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    path = make_model(directory, "llama")
    model, tok = LlamaForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    partial = [t for t in range(len(tok)) if "\ufffd" in tok.decode([t]) or not tok.decode([t])]
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 4.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0] = 0.0
            layer.mlp.down_proj.weight[0] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[partial] = 0.0
        model.lm_head.weight[partial, 0] = -50.0
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def distinct(tmp_path_factory):
    directory = tmp_path_factory.mktemp("distinct")
    hf = distinct_model(directory / "hf")
    process, base = _serve(write_gguf(hf, directory / "tiny.gguf"))
    yield {"base": base, "hf": hf}
    process.terminate()
    process.wait(10)


def served(base: str, hf, **options) -> ModelConfig:
    return ModelConfig(model=f"{base}#tiny", backend="openai", api_tokenizer=str(hf), api_key_env=KEY_ENV, **options)


def _book(lm) -> np.ndarray:
    """``tests/test_extract.py``'s book (a greedy and a top-40 continuation planted in real text), as the ids of
    its text read again: what a server reading the text is asked."""
    from test_extract import _book as planted

    tok = lm.tokenizer
    return np.asarray(tok(tok.decode(planted(lm).tolist()), add_special_tokens=False).input_ids, dtype=np.int64)


def test_served_pz_equals_the_local_pz(distinct, api_key):  # noqa: F811
    local = load_model(ModelConfig(model=str(distinct["hf"]), device="cpu"))
    lm = load_model(served(distinct["base"], distinct["hf"]))
    ids = _book(local)
    starts = example_starts(len(ids), 100, 10)
    for settings in ((40, 1.0, 4), (5, 0.7, 4)):
        mine, theirs = pz(lm, ids, starts, 50, 50, settings), pz(local, ids, starts, 50, 50, settings)
        asked = ~np.isnan(mine.sampled)  # examples whose text tokenizes back to their tokens
        assert asked.sum() >= len(starts) // 2 and np.array_equal(np.isnan(mine.greedy), ~asked)
        for a, b in ((mine.greedy[asked], theirs.greedy[asked]), (mine.sampled[asked], theirs.sampled[asked])):
            assert np.array_equal(np.isneginf(a), np.isneginf(b))
            np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], rtol=0, atol=TOLERANCE)
        assert (mine.greedy[asked] == 0).any() and np.isfinite(mine.sampled[asked]).any()  # not all p_z 0
    assert lm.model.requests >= 2 * asked.sum()


def test_extract_through_the_server_gives_the_local_figures(distinct, api_key, tmp_path):  # noqa: F811
    from test_schemas import validate

    local = load_model(ModelConfig(model=str(distinct["hf"]), device="cpu"))
    book = tmp_path / "book.txt"
    book.write_text(local.tokenizer.decode(_book(local).tolist()), "utf-8")
    common = [book, "--raw", "--format", "json"]
    model = ["--backend", "openai", "--model", f"{distinct['base']}#tiny", "--api-tokenizer", distinct["hf"]]
    model += ["--api-key-env", KEY_ENV]
    done = run("extract", *common, *model)
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    validate(out, "extract")
    reference = json.loads(run("extract", *common, "--model", distinct["hf"]).stdout)
    [mine], [theirs] = out["books"], reference["books"]
    assert mine["examples"] == theirs["examples"] and mine["max_pz"] == pytest.approx(theirs["max_pz"], rel=1e-3)
    assert mine["unknown_examples"] == theirs["unknown_examples"] == 0
    for name in ("greedy_examples", "discoverable_examples", "greedy_share", "extractable_share", "max_pz_greedy"):
        assert mine[name] == theirs[name], name
    assert mine["greedy_examples"] > 0  # the planted greedy continuation, written back by the server's model too
    plan = run("extract", book, "--raw", *model, "--dry-run")
    estimated = plan.stdout.split(" examples (")[0].rsplit(" ", 1)[1]  # estimated from the text's size
    assert f"one request per example to the server: about {estimated} requests" in plan.stdout, plan.output
    printed = run("extract", book, "--raw", *model)
    assert printed.exit_code == 0 and "examples" in printed.stdout


def test_a_server_that_cannot_give_what_p_z_needs_is_refused_in_one_line(server, distinct, api_key, tmp_path):  # noqa: F811
    """Too few log-probabilities listed (the plain tiny Llama's byte tokens share one text, so its lists are short
    of 41), none (the logit-bias way), an example longer than the server's context: one line each."""
    book = tmp_path / "book.txt"
    book.write_text((CORPUS / "members" / "10031.txt").read_text("utf-8")[20_000:23_000], "utf-8")
    plain = ["--backend", "openai", "--model", f"{server['base']}#tiny", "--api-tokenizer", server["hf"]]
    plain += ["--api-key-env", KEY_ENV, "--raw"]
    short = run("extract", book, *plain)
    assert_clean_error(short, "needs the top 41")
    assert "--top-k" in short.stderr
    mine = ["--backend", "openai", "--model", f"{distinct['base']}#tiny", "--api-tokenizer", distinct["hf"]]
    mine += ["--api-key-env", KEY_ENV, "--raw"]
    none = run("extract", book, *mine, "--api-logprobs", "logit_bias")
    assert_clean_error(none, "--mode continuation")
    assert none.exit_code == MODEL_UNAVAILABLE
    long = run("extract", book, *mine, "--prefix-tokens", "200", "--suffix-tokens", "100")
    assert_clean_error(long, "context")


@pytest.mark.parametrize(("mode", "words"), [("ok", "needs the top 41"), ("nan", "not a finite number"),
                                             ("short", "echoed its prompt as other tokens")])  # fmt: skip
def test_malformed_log_probabilities_are_one_line(mode, words, tiny_gpt2, tmp_path, api_key):  # noqa: F811
    from transformers import AutoTokenizer

    book = tmp_path / "book.txt"
    book.write_text((CORPUS / "members" / "10031.txt").read_text("utf-8")[20_000:22_000], "utf-8")
    with hostile_server(AutoTokenizer.from_pretrained(tiny_gpt2), mode) as hostile:
        done = run("extract", book, "--raw", "--backend", "openai", "--model", f"{hostile.base}#tiny",
                   "--api-tokenizer", tiny_gpt2, "--api-retries", "0")  # fmt: skip
    assert_clean_error(done, words)


@pytest.fixture(scope="module")
def chat_only(tmp_path_factory):
    directory = tmp_path_factory.mktemp("chat")
    process, base = _serve(write_gguf(make_model(directory / "hf", "llama"), directory / "tiny.gguf"), 1024, True)
    yield base
    process.terminate()
    process.wait(10)


FAST = ("--mode", "continuation", "--prompts", "2", "--samples", "2", "--prompt-words", "20")
FAST += ("--continuation-words", "20", "--new-tokens", "12", "--stretch-words", "200")


def test_continuation_against_a_chat_only_server_resumes_and_recomputes(chat_only, api_key, tmp_path):  # noqa: F811
    from test_probe_command import cache_entries
    from test_schemas import validate

    from docaudit.corpus.documents import load_documents
    from docaudit.query.chat import Ask, Writer

    books = sorted((CORPUS / "members").glob("*.txt"))[:1]
    library = sorted((CORPUS / "nonmembers").glob("*.txt"))[:3]
    args = [*books, *[a for p in library for a in ("--null-library", p)], *FAST]
    args += ["--api-base", chat_only, "--api-model", "tiny", "--api-key-env", KEY_ENV]
    plan = run("extract", *args, "--dry-run")
    assert plan.exit_code == 0 and "8 passages in 4 texts; at most 16 requests" in plan.stdout, plan.output
    stopped = run("extract", *args, "--max-requests", "9")
    assert_clean_error(stopped, "--max-requests 9 reached")
    kept = cache_entries("generations")
    assert 4 <= kept <= 8
    done = run("extract", *args, "--format", "json")
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    validate(out, "extract")
    assert out["writer"]["requests"] == 16 - kept and out["writer"]["cached"] == kept
    assert "not a membership test" in out["measured"] and len(out["library"]) == 3
    again = json.loads(run("extract", *args, "--format", "json").stdout)
    assert again["writer"] == {**again["writer"], "requests": 0, "cached": 16}

    def figures(book: dict) -> dict:
        return {k: v for k, v in book.items() if k not in ("requests", "cached", "seconds")}

    assert [figures(b) for b in again["books"]] == [figures(b) for b in out["books"]]
    [book] = out["books"]
    [doc] = load_documents(books)
    from docaudit.audit.extraction_continuation import passages_of
    from docaudit.config import ContinuationConfig

    config = ContinuationConfig(prompts=2, samples=2, prompt_words=20, continuation_words=20, new_tokens=12,
                                stretch_words=200)  # fmt: skip
    writer = Writer(out["writer"]["identity"], "chat")
    laid = passages_of(doc, config, 0)
    from docaudit.audit.probes import NGRAM_INSTRUCTION

    written = writer.write([Ask(NGRAM_INSTRUCTION + p["opening"], 2, 12, 1.0, 0) for p in laid])
    assert writer.sent == 0  # every answer from the cache
    longest = [max(brute_longest(p["real"].split(), w.split()) for w in texts) for p, texts in zip(laid, written)]
    assert book["longest_match_words"] == max(longest)
    chars = [max(brute_longest(" ".join(p["real"].split()), " ".join(w.split())) for w in texts)
             for p, texts in zip(laid, written)]  # fmt: skip
    assert book["longest_match_chars"] == max(chars)
    assert book["long_matches"] == sum(w >= 20 for w in longest) and book["passages"] == 2
    written = run("extract", *args, "--out", tmp_path / "out")
    assert written.exit_code == 0, written.output
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"extract.json", "extract.csv"}
    validate(json.loads((tmp_path / "out" / "extract.json").read_text("utf-8")), "extract")
    import pandas as pd

    rows = pd.read_csv(tmp_path / "out" / "extract.csv")
    assert len(rows) == 2 * 4 and list(rows.role).count("judged") == 2
    shown = run("extract", *args)
    assert (
        shown.exit_code == 0 and "long match in" in shown.stdout and "member" not in shown.stdout.replace("members", "")
    )


@pytest.mark.parametrize(("mode", "words"), [("notext", "answered without a text"), ("html", "")])
def test_a_malformed_answer_to_a_continuation_is_one_line(mode, words, tiny_gpt2, tmp_path, api_key):  # noqa: F811
    from transformers import AutoTokenizer

    book = tmp_path / "book.txt"
    book.write_text((CORPUS / "members" / "10031.txt").read_text("utf-8")[20_000:40_000], "utf-8")
    with hostile_server(AutoTokenizer.from_pretrained(tiny_gpt2), mode) as hostile:
        done = run("extract", book, "--raw", *FAST, "--api-base", hostile.base, "--api-model", "tiny",
                   "--api-retries", "0")  # fmt: skip
    assert_clean_error(done, words)


def _short_texts(tmp_path, folder: str, n: int, words: int = 1200) -> list:
    """The first ``n`` corpus texts of ``folder``, each cut to about ``words`` words of its middle."""
    out = []
    for path in sorted((CORPUS / folder).glob("*.txt"))[:n]:
        text = path.read_text("utf-8").split()
        mine = tmp_path / folder / path.name
        mine.parent.mkdir(exist_ok=True)
        mine.write_text(" ".join(text[len(text) // 2 : len(text) // 2 + words]), "utf-8")
        out.append(mine)
    return out


def test_audit_extracts_by_continuation_from_a_chat_only_server(chat_only, api_key, tmp_path):  # noqa: F811
    """The audit of a model that only chats gives extract's continuation figures, the same as the command alone
    (then every answer is read from the cache), beside the statement and not counted; the case file quotes them."""
    from test_schemas import validate

    [book], library = _short_texts(tmp_path, "members", 1), _short_texts(tmp_path, "nonmembers", 3)
    target = ["--api-base", chat_only, "--api-model", "tiny", "--api-key-env", KEY_ENV]
    nulls = [a for p in library for a in ("--null-library", p)]
    audited = run("audit", book, "--chat-only", *nulls, *target, "--out", tmp_path / "case", "--format", "json")
    assert audited.exit_code == 0, audited.output
    out = json.loads(audited.stdout)
    validate(out, "audit")
    [said] = out["books"]
    assert [t["test"] for t in said["tests"]] == ["probe"]
    figures = said["figures"]["extract"]
    assert figures["mode"] == "continuation" and figures["power_words"] == "not measured for this model"
    alone = run("extract", book, *nulls, *target, "--mode", "continuation", "--format", "json")
    assert alone.exit_code == 0, alone.output
    body = json.loads(alone.stdout)
    assert body["writer"]["requests"] == 0 and body["writer"]["cached"] > 0  # the audit asked exactly these
    [theirs] = body["books"]
    for name in ("long_matches", "long_match_share", "longest_match_words", "mean_recall", "baseline"):
        assert figures[name] == theirs[name], name
    assert figures["passages_continued"] == theirs["passages"] >= 2
    assert figures["baseline"]["texts"] == 3
    html = (tmp_path / "case" / "audit.html").read_text("utf-8")
    assert f"continuing {theirs['passages']} passages of the book" in html


def test_audit_extracts_p_z_through_a_server_with_prompt_log_probabilities(distinct, api_key, tmp_path):  # noqa: F811
    """A server echoing its prompt's log-probabilities gives the audit extract's p_z figures, as the command alone."""
    local = load_model(ModelConfig(model=str(distinct["hf"]), device="cpu"))
    book = tmp_path / "book.txt"
    book.write_text(local.tokenizer.decode(_book(local).tolist()), "utf-8")
    model = ["--backend", "openai", "--model", f"{distinct['base']}#tiny", "--api-tokenizer", distinct["hf"]]
    model += ["--api-key-env", KEY_ENV, "--raw"]
    nulls = [a for p in _short_texts(tmp_path, "nonmembers", 2, 400) for a in ("--null-library", p)]
    audited = run("audit", book, *model, *nulls, "--extract-tokens", "400", "--format", "json")
    assert audited.exit_code == 0, audited.output
    figures = json.loads(audited.stdout)["books"][0]["figures"]["extract"]
    alone = run("extract", book, *model, *nulls, "--first-tokens", "400", "--format", "json")
    theirs = json.loads(alone.stdout)["books"][0]
    assert figures["mode"] == "pz" and figures["first_tokens"] == theirs["tokens"]
    for name in ("extractable_share", "greedy_share", "longest_run_tokens", "max_pz", "baseline"):
        assert figures[name] == theirs[name], name
    assert figures["greedy_share"] > 0  # the planted greedy continuation, written back through the server


@pytest.fixture(scope="module")
def no_echo(tmp_path_factory):
    """The tiny Llama served by a llama-cpp-python server that ignores ``echo``, as many hosted completions APIs do."""
    directory = tmp_path_factory.mktemp("noecho")
    hf = make_model(directory / "hf", "llama")
    process, base = _serve(write_gguf(hf, directory / "tiny.gguf"), 1024, no_echo=True)
    yield {"base": base, "hf": hf}
    process.terminate()
    process.wait(10)


def test_a_server_found_to_give_no_prompt_log_probabilities(no_echo, api_key, tmp_path, monkeypatch):  # noqa: F811
    """Asked whether it echoes (``--api-logprobs auto``), the server is found not to: ``extract`` is refused in one line
    naming the continuation mode, and ``audit``, planned for p_z, gives the continuation's figures instead, the same
    as ``extract --mode continuation`` alone (every answer then from the cache), without stopping the other tests."""
    from test_audit import audit_api, fake_test

    from docaudit.api.audit import audit, plan_audit
    from docaudit.api.audit_request import AuditRequest
    from docaudit.api.audit_tests import TESTS
    from docaudit.errors import MODEL_UNAVAILABLE

    [book], library = _short_texts(tmp_path, "members", 1), _short_texts(tmp_path, "nonmembers", 2)
    target = ["--backend", "openai", "--model", f"{no_echo['base']}#tiny", "--api-tokenizer", no_echo["hf"]]
    target += ["--api-key-env", KEY_ENV]
    refused = run("extract", book, *target)
    assert_clean_error(refused, "--mode continuation")
    assert refused.exit_code == MODEL_UNAVAILABLE
    monkeypatch.setattr(audit_api, "TESTS", {"first": fake_test("first", {book: 0.02}), "extract": TESTS["extract"]})
    model = served(no_echo["base"], no_echo["hf"])
    request = AuditRequest([book], model, library=library)
    [planned] = [t for t in plan_audit(request).tests if t.name == "extract"]
    assert planned.runs and planned.request.config.mode == "pz"
    [said] = audit(request).body["books"]
    assert said["p_value"] == pytest.approx(0.02)
    figures = said["figures"]["extract"]
    assert figures["mode"] == "continuation" and figures["baseline"]["texts"] == 2
    nulls = [a for p in library for a in ("--null-library", p)]
    alone = run("extract", book, *nulls, *target, "--mode", "continuation", "--format", "json")
    assert alone.exit_code == 0, alone.output
    body = json.loads(alone.stdout)
    assert body["writer"]["requests"] == 0 and body["writer"]["cached"] > 0
    [theirs] = body["books"]
    for name in ("long_matches", "long_match_share", "longest_match_words", "mean_recall", "baseline"):
        assert figures[name] == theirs[name], name
    assert figures["passages_continued"] == theirs["passages"] >= 2
