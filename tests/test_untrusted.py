"""What comes from others cannot make docaudit contact a server unasked, poison its cache, hang, or end in a
traceback: classifier cards, answers of real (misbehaving) servers on 127.0.0.1, config files, cache entries,
saved classifiers and output folders."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text
from hostile import hostile_server
from test_cli import assert_clean_error, run

from docaudit.config import ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.query.cache import StatsCache
from docaudit.query.models import load_model
from docaudit.query.querier import Querier

SECRET_ENV, SECRET = "MY_PRIVATE_TOKEN", "card-chosen-secret"
MINE_ENV, MINE = "DOCAUDIT_TEST_MY_KEY", "the-users-own-key"


def api_options(server, tiny_gpt2, *extra):
    return (
        "--backend", "openai", "--api-base", server.base, "--api-tokenizer", tiny_gpt2, "--api-logprobs", "echo",
        "--context", "16", "--max-tokens", "40", *extra,
    )  # fmt: skip


def score(doc, server, tiny_gpt2, *extra):
    return run("score", doc, "--methods", "loss", "--format", "json", *api_options(server, tiny_gpt2, *extra))


def completions(server) -> int:
    return sum(path == "/v1/completions" for path, _ in server.seen)


# --- a card decides nothing that reaches the network -----------------------------------------------------------


def card_naming(server, trained, tmp_path, tiny_gpt2) -> Path:
    """A copy of the classifier whose card names the server, a key variable, its own timeout and retries."""
    forged = tmp_path / "forged"
    shutil.copytree(trained, forged)
    card = json.loads((forged / "card.json").read_text())
    card["model_identity"] = f"openai:{server.base}#tiny"
    card["model_config"] |= {
        "model": None, "backend": "openai", "api_base": server.base, "api_model": "tiny",
        "api_key_env": SECRET_ENV, "api_tokenizer": str(tiny_gpt2), "api_logprobs": "echo",
        "api_timeout": 3600.0, "api_retries": 50,
    }  # fmt: skip
    (forged / "card.json").write_text(json.dumps(card))
    return forged


def test_a_card_naming_a_server_needs_the_users_grant(trained, tokenizer, tiny_gpt2, tmp_path, doc, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(MINE_ENV, MINE)
    with hostile_server(tokenizer) as server:
        forged = card_naming(server, trained, tmp_path, tiny_gpt2)
        result = run("predict", "--classifier", forged, doc)
        assert_clean_error(result, f"asks to send the documents to the server {server.base}")
        assert SECRET_ENV in result.stderr and "--use-card-backend" in result.stderr and "--api-base" in result.stderr
        assert server.seen == []  # nothing was sent
        # confirming the card's server does not read the variable the card names
        result = run("predict", "--classifier", forged, "--use-card-backend", doc)
        assert_clean_error(result, f"reads the API key from the environment variable {SECRET_ENV}")
        assert server.seen == []
        result = run(
            "predict", "--classifier", forged, "--use-card-backend", "--api-key-env", MINE_ENV, "--format", "json", doc
        )
        assert result.exit_code == 0, result.output
        row = json.loads(result.stdout)["rows"][0]
        local = json.loads(run("predict", "--classifier", trained, "--format", "json", doc).stdout)["rows"][0]
        assert row["floored_logprobs"] == 0 and row["n_tokens"] == local["n_tokens"]  # the same tokens as locally
        served = completions(server)
        assert served > 0
        assert {auth for _, auth in server.seen} == {f"Bearer {MINE}"}  # the user's key, never the card's
        assert SECRET not in result.output
        # the card's 3600 s timeout and 50 retries give way to the user's
        server.mode = "silent"
        other = tmp_path / "other.txt"
        other.write_text(corpus_text("nonmembers", corpus_ids("nonmembers", 1)[0], n_chars=600))
        result = run(
            "predict", "--classifier", forged, "--use-card-backend", "--api-key-env", MINE_ENV,
            "--api-timeout", "1", "--api-retries", "0", other,
        )  # fmt: skip
        assert_clean_error(result, "gave no complete answer within 1 s (--api-timeout)")
        assert completions(server) - served < 51  # the card's 50 retries would try one window 51 times
        # a server other than the card's, named by the user, is refused before it is asked anything
        with hostile_server(tokenizer) as other_server:
            result = run(
                "predict", "--classifier", forged, "--backend", "openai", "--api-base", other_server.base,
                "--api-tokenizer", tiny_gpt2, doc,
            )  # fmt: skip
            assert_clean_error(result, f"this classifier was trained for model openai:{server.base}#tiny")
            assert other_server.seen == []


def test_in_a_batch_a_document_with_non_finite_values_is_a_named_skip(
    trained, tokenizer, tiny_gpt2, tmp_path, monkeypatch
):
    monkeypatch.setenv(MINE_ENV, MINE)
    books = []
    for i, book in enumerate(corpus_ids("nonmembers", 2)):
        books.append(tmp_path / f"{book}.txt")
        books[-1].write_text(("POISONED " if i == 0 else "") + corpus_text("nonmembers", book, n_chars=400))
    with hostile_server(tokenizer, "nan") as server:
        server.poison = "POISON"
        forged = card_naming(server, trained, tmp_path, tiny_gpt2)
        result = run(
            "predict", "--classifier", forged, "--use-card-backend", "--api-key-env", MINE_ENV, "--format", "json",
            *books,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {Path(r["file"]).name: r for r in json.loads(result.stdout)["rows"]}
    assert "answered the log-probability nan" in rows[books[0].name]["skipped"]
    assert "membership_score" in rows[books[1].name]
    assert "skipped 1 document (non-finite statistics)" in result.stderr
    assert len(StatsCache().entries()) == 1  # only the usable document was cached


def test_a_card_naming_a_hub_model_needs_the_users_grant(trained, tmp_path, doc):
    forged = tmp_path / "hub"
    shutil.copytree(trained, forged)
    card = json.loads((forged / "card.json").read_text())
    card["model_identity"] = "hub:someone/some-model@main"
    card["model_config"]["model"] = "someone/some-model"
    (forged / "card.json").write_text(json.dumps(card))
    assert_clean_error(
        run("predict", "--classifier", forged, doc), "asks to load the model someone/some-model from the Hugging Face"
    )


# --- values from a server are checked before use and before caching --------------------------------------------


@pytest.mark.parametrize("mode", ["nan", "inf", "huge"])
def test_non_finite_answers_are_refused_and_never_cached(tokenizer, tiny_gpt2, doc, tmp_path, mode):
    with hostile_server(tokenizer, mode) as server:
        result = score(doc, server, tiny_gpt2, "--api-retries", "0")
        assert_clean_error(result, "the server at " + server.base + "/completions answered the log-probability")
        assert str(doc) in result.stderr
        assert StatsCache().entries() == []  # nothing cached
        server.mode = "ok"  # the same server, healthy now, on the same cache
        result = score(doc, server, tiny_gpt2)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["loss"] == pytest.approx(-1.5, abs=1e-6)  # the mean log-probability served
    assert row["floored_logprobs"] == 0


def test_a_cache_entry_holding_non_finite_values_is_a_miss(tiny_gpt2):
    cache = StatsCache()
    querier = Querier(load_model(ModelConfig(model=str(tiny_gpt2))), QueryConfig(context=16), cache)
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=300)
    good = querier.stats(text)
    path = cache.entries()[0]
    arrays = dict(np.load(path))
    arrays["logp"] = arrays["logp"].copy()
    arrays["logp"][3] = np.nan
    with path.open("wb") as f:
        np.savez(f, **arrays)
    again = querier.stats(text)
    assert np.isfinite(again.logp).all() and np.array_equal(again.logp, good.logp)
    assert np.isfinite(np.load(path)["logp"]).all()  # replaced by the recomputed entry


def test_a_model_with_a_nan_weight_is_refused(tiny_gpt2, tmp_path, doc):
    import torch
    from transformers import AutoModelForCausalLM

    broken = tmp_path / "broken"
    shutil.copytree(tiny_gpt2, broken)
    model = AutoModelForCausalLM.from_pretrained(broken)
    with torch.no_grad():
        model.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")
    model.save_pretrained(broken)
    result = run("score", doc, "--model", broken, "--context", "16", "--format", "json")
    assert_clean_error(result, "the model gave non-finite statistics")
    assert str(doc) in result.stderr and StatsCache().entries() == []


@pytest.mark.parametrize(
    "mode, message",
    [
        ("html", "answered text/html, not JSON"),
        ("list", "answered a JSON list, not an object"),
        ("nochoices", "answered without a completion (choices: [])"),
        ("string", "answered 'low' as the log-probability of prompt token"),
        ("cut", "the connection was closed before the answer was complete"),
        ("status", "answered 404"),
        ("short", "top lists): its tokenization differs from the local tokenizer"),  # whichever window fails first
        ("models", "/v1/models answered no list of models with ids (data: 'tiny')"),
    ],
)
def test_a_malformed_answer_is_one_line_naming_the_url(tokenizer, tiny_gpt2, doc, mode, message):
    with hostile_server(tokenizer, mode) as server:
        result = score(doc, server, tiny_gpt2, "--api-retries", "0")
    assert_clean_error(result, message)
    assert f"{server.base}/{'models' if mode == 'models' else 'completions'}" in result.stderr


def test_logit_bias_positions_that_never_win_are_counted_as_floored(tokenizer, tiny_gpt2, doc, caplog):
    with hostile_server(tokenizer, "stubborn") as server:
        result = run(
            "score", doc, "--methods", "loss", "--format", "json", "--backend", "openai", "--api-base", server.base,
            "--api-tokenizer", tiny_gpt2, "--api-logprobs", "logit_bias", "--context", "16", "--max-tokens", "6",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["floored_logprobs"] == row["n_tokens"] - 1 == 5
    assert f"{doc}: 5 of 5 log-probabilities are only upper bounds" in caplog.text


# --- deadlines: the hostile server holds a connection for at most hostile.MAX_WAIT (30 s), so a deadline that did
# not fire would end in another error (the connection closed, every retry used), never in the deadline's message


def test_a_trickling_server_is_abandoned_at_the_request_deadline(tokenizer, tiny_gpt2, doc):
    """One byte a second never ends a read timeout: only the whole-request deadline does."""
    with hostile_server(tokenizer, "trickle") as server:
        result = score(doc, server, tiny_gpt2, "--api-timeout", "3", "--api-retries", "0")
    assert_clean_error(result, "gave no complete answer within 3 s (--api-timeout)")


def test_a_silent_server_costs_the_timeouts_the_user_chose(tokenizer, tiny_gpt2, doc):
    with hostile_server(tokenizer, "silent") as server:
        result = score(doc, server, tiny_gpt2, "--api-timeout", "1", "--api-retries", "1")
        assert_clean_error(result, "(2 tries; --api-retries 1)")
        assert completions(server) <= 2 * 4  # two tries of each window, four windows at once at most
        result = score(
            doc, server, tiny_gpt2, "--api-timeout", "1", "--api-retries", "20", "--api-document-timeout", "2.5"
        )
    assert_clean_error(result, "allowed per document (--api-document-timeout)")


def test_api_deadlines_are_checked_like_options(tmp_path, doc):
    assert_clean_error(run("score", doc, "--api-timeout", "0"), "--api-timeout 0.0 is out of range")
    assert_clean_error(run("score", doc, "--api-retries", "-1"), "--api-retries -1 is out of range")
    assert_clean_error(run("score", doc, "--api-timeout", "nan"), "--api-timeout nan is out of range")


# --- config files ------------------------------------------------------------------------------------------------


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, doc):
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 7):  # 9**7 names once flattened: bounded, should aliases ever be read again
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nscore: {methods: *g}\n")
    assert_clean_error(run("score", "--config", bomb, doc), "aliases (*name) are not accepted")
    big = tmp_path / "big.yaml"
    big.write_text("score:\n  context: 16\n" + "# padding\n" * 200_000)
    assert_clean_error(run("score", "--config", big, doc), "a config file is a few lines")


@pytest.mark.parametrize(
    "line, message",
    [
        ("context = [1, 2]", "context: expected a single value, not a list"),
        ("context = 1e400", "context = inf: not a finite number"),
        ("context = 1", "--context 1 is out of range"),
        ('api-timeout = "soon"', "'soon' is not a valid float"),
        ("api-timeout = -5", "--api-timeout -5.0 is out of range"),
        ("api-retries = 1e3", "--api-retries"),
        ("methods = {a = 1}", "methods: expected a single value, not dict"),
    ],
)
def test_config_values_are_checked_like_options(tmp_path, doc, line, message):
    config = tmp_path / "c.toml"
    config.write_text(f"[score]\n{line}\n")
    assert_clean_error(run("score", "--config", config, doc), message)


@pytest.mark.parametrize("grant", ["trust-remote-code", "use-card-backend"])
def test_a_config_file_cannot_give_a_confirmation(tmp_path, doc, grant):
    config = tmp_path / "c.toml"
    config.write_text(f"[predict]\n{grant} = true\n")
    assert_clean_error(run("predict", "--config", config, doc), f"give --{grant} on the command line")
    config.write_text(f"[predict]\n{grant} = false\n")  # as `config show` writes it
    assert "give --" not in run("predict", "--config", config, "--classifier", tmp_path / "none", doc).stderr


def test_config_file_gives_api_deadlines_and_may_start_with_a_bom(tmp_path):
    config = tmp_path / "c.toml"
    config.write_bytes(b"\xef\xbb\xbf[score]\napi-timeout = 7.5\napi-retries = 0\n")
    result = run("config", "show", "score", "--config", config)
    assert result.exit_code == 0, result.output
    assert "api-timeout = 7.5" in result.stdout and "api-retries = 0" in result.stdout


# --- output folders, duplicates, model identity, saved classifiers -------------------------------------------------


def test_overwrite_keeps_a_file_the_marker_does_not_list(tmp_path):
    from docaudit.outputs import prepare_output, write_marker

    out = tmp_path / "ev"
    out.mkdir()
    (out / "evaluation.json").write_text("{}")
    write_marker(out, "evaluation", ["evaluation.json"])
    swap = out / ".evaluation.json.swp"
    swap.write_text("the user's unsaved edits")
    with pytest.raises(DocauditError, match=r"files docaudit did not write \(\.evaluation\.json\.swp\)"):
        prepare_output(out, "evaluation", overwrite=True)
    assert swap.read_text() == "the user's unsaved edits"


def test_a_copy_differing_by_a_trailing_newline_is_a_duplicate():
    from docaudit.corpus.documents import Document, separate_sets
    from docaudit.io import sha256_text

    text = "Call me Ishmael.\nSome years ago"
    a = [Document("a", "a.txt", text, sha256_text(text))]
    b = [Document("b", "b.txt", text + "\n", sha256_text(text + "\n"))]
    with pytest.raises(DocauditError, match="same text after cleaning, whitespace aside: a.txt = b.txt"):
        separate_sets(a, b)


def test_a_forged_weights_memo_does_not_refuse_the_right_model(tiny_gpt2):
    from docaudit.query.cache import cache_root
    from docaudit.query.models import resolve_source

    identity = resolve_source(str(tiny_gpt2)).identity
    (memo,) = (cache_root() / "weights-hash").glob("*.txt")
    memo.write_text("0" * 64)
    assert resolve_source(str(tiny_gpt2)).identity != identity  # the forged memo is read ...
    lm = load_model(ModelConfig(model=str(tiny_gpt2)), expected_identity=identity)  # ... but not trusted to refuse
    assert lm.identity == identity and memo.read_text() != "0" * 64


def test_a_deeply_nested_card_or_marker_is_one_line(trained, tmp_path, doc):
    deep = "[" * 100_000 + "]" * 100_000
    forged = tmp_path / "deep"
    shutil.copytree(trained, forged)
    (forged / "card.json").write_text(deep)
    assert_clean_error(run("predict", "--classifier", forged, doc), "is not valid JSON")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".docaudit-output.json").write_text(deep)
    (out / "evaluation.json").write_text("{}")
    from docaudit.outputs import prepare_output

    with pytest.raises(DocauditError, match="was not written by docaudit"):
        prepare_output(out, "evaluation", overwrite=True)


def test_a_saved_classifier_whose_steps_disagree_on_feature_counts_is_refused(trained, tmp_path):
    import skops.io as sio

    from docaudit.methods.meta.persistence import CLASSIFIER_FILE, load_classifier, trusted_types

    pipe, card = load_classifier(trained)
    scaler = pipe.named_steps["scale"]
    for name in ("min_", "scale_", "data_min_", "data_max_", "data_range_"):
        setattr(scaler, name, getattr(scaler, name)[:3])
    scaler.n_features_in_ = 3
    cut = tmp_path / "cut"
    shutil.copytree(trained, cut)
    (cut / CLASSIFIER_FILE).write_bytes(sio.dumps(pipe))
    assert sio.loads((cut / CLASSIFIER_FILE).read_bytes(), trusted=trusted_types()) is not None  # allowed types
    with pytest.raises(DocauditError, match="its steps do not fit together .*scaler"):
        load_classifier(cut)


def test_the_fetcher_goes_through_the_proxy_the_environment_names(tmp_path, monkeypatch):
    """As with urllib before: ``http_proxy`` is honoured (the mirror's host is never resolved here, only the proxy
    on 127.0.0.1 is reached) and ``no_proxy`` still wins."""
    import hashlib
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from docaudit.config import FetchConfig
    from docaudit.corpus.fetch import fetch_manifest
    from docaudit.corpus.manifest import ManifestRow

    book = corpus_text("members", corpus_ids("members", 1)[0], start=0, n_chars=5000).encode()
    asked = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(book)))
            self.end_headers()
            self.wfile.write(book)

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    proxy.daemon_threads, proxy.block_on_close = True, False
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
        row = ManifestRow("12345", "member", sha256=hashlib.sha256(book).hexdigest())
        report = fetch_manifest([row], tmp_path / "out", "http://mirror.invalid", progress=False)
        assert report.ok and (tmp_path / "out" / "12345.txt").read_bytes() == book
        assert asked == ["http://mirror.invalid/cache/epub/12345/pg12345.txt"]
        monkeypatch.setenv("no_proxy", "mirror.invalid")
        once = FetchConfig(retries=0)
        report = fetch_manifest([ManifestRow("12346", "member")], tmp_path / "o2", "http://mirror.invalid", once, False)
        assert not report.ok and len(asked) == 1  # not through the proxy: the name does not resolve
    finally:
        proxy.shutdown()
        proxy.server_close()
