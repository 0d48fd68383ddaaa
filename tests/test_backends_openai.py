"""The OpenAI-compatible backend against a real server: llama-cpp-python's, started here on 127.0.0.1 with a tiny
float32 GGUF made from a config-built Llama. Echo equals the in-process llama.cpp backend on the same file; the
logit-bias search recovers the echoed log-probabilities; what the API cannot provide stops before any query."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text, make_model
from test_cli import assert_clean_error, run
from test_gguf import write_gguf

from docaudit.config import ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.query.models import load_model
from docaudit.query.querier import Querier

pytest.importorskip("llama_cpp.server.app")

KEY_ENV, KEY = "DOCAUDIT_TEST_API_KEY", "s3cret-test-key"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(gguf, n_ctx: int = 256, chat_only: bool = False, no_echo: bool = False):
    """llama-cpp-python's server on a free local port serving ``gguf`` as ``tiny`` (``n_ctx`` positions), with an
    API key; ``chat_only``: without its completions routes (``llama_server.py --chat-only``); ``no_echo``: ignoring
    ``echo`` (``llama_server.py --no-echo``)."""
    port = _free_port()
    command = [sys.executable, str(Path(__file__).parent / "llama_server.py"), *(["--no-echo"] if no_echo else [])]
    command += ["--chat-only"] if chat_only else []
    command += ["--model", str(gguf)]
    command += ["--host", "127.0.0.1"]
    command += ["--port", str(port), "--logits_all", "true", "--n_ctx", str(n_ctx), "--model_alias", "tiny"]
    command += ["--n_threads", "1", "--api_key", KEY]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    request = urllib.request.Request(base + "/models", headers={"Authorization": f"Bearer {KEY}"})
    deadline = time.time() + 90
    while True:
        try:
            urllib.request.urlopen(request, timeout=2).read()
            break
        except OSError:
            if process.poll() is not None or time.time() > deadline:
                process.kill()
                pytest.fail("the llama-cpp-python server did not start")
            time.sleep(0.3)
    return process, base


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The tiny Llama (its tokenizer puts a BOS first) as a float32 GGUF, served."""
    directory = tmp_path_factory.mktemp("served")
    hf = make_model(directory / "hf", "llama")
    gguf = write_gguf(hf, directory / "tiny.gguf")
    process, base = _serve(gguf)
    yield {"base": base, "gguf": gguf, "hf": hf}
    process.terminate()
    process.wait(10)


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def api(server, **options):
    return ModelConfig(backend="openai", api_base=server["base"], api_key_env=KEY_ENV, **options)


def sample(n_chars: int) -> str:
    return corpus_text("members", corpus_ids("members", 1)[0], n_chars=n_chars)


def test_echo_equals_in_process_llamacpp(server, api_key):
    lm = load_model(api(server, api_tokenizer=str(server["gguf"])))
    assert lm.model.mode == "echo" and lm.model.model == "tiny"
    query = QueryConfig(context=32, gp=False)
    text = sample(1200)
    querier = Querier(lm, query)
    remote = querier.stats(text)
    local = Querier(load_model(ModelConfig(model=str(server["gguf"]), backend="llamacpp")), query).stats(text)
    assert np.array_equal(remote.token_ids, local.token_ids)
    assert np.abs(remote.logp - local.logp).max() < 1e-4
    assert np.abs(remote.max_logp - local.max_logp).max() < 1e-4
    assert np.isnan(remote.mu).all() and remote.gp_sum is None  # not available over the API
    windows = len(remote.windows())
    assert querier.backend.requests == windows + 3  # models, tokenize, echo probe, one per window
    assert KEY not in json.dumps(querier.backend.identity()) and KEY not in querier.key("x")


def test_logit_bias_search_recovers_echo(server, api_key):
    text = sample(60)
    query = QueryConfig(context=32, gp=False)
    echo = Querier(load_model(api(server, api_tokenizer=str(server["gguf"]))), query).stats(text)
    lm = load_model(api(server, api_tokenizer=str(server["gguf"]), api_logprobs="logit_bias", api_concurrency=4))
    querier = Querier(lm, query)
    before = lm.model.requests
    searched = querier.stats(text)
    assert np.abs(searched.logp - echo.logp).max() < 1e-3
    assert np.abs(searched.max_logp - echo.max_logp).max() < 1e-5
    used = lm.model.requests - before
    assert echo.n_scored <= used <= querier.backend.estimate(echo.n_tokens, 32, 31)


def test_api_cannot_serve_minkpp_or_gp(server, api_key, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(sample(400))
    common = ("--backend", "openai", "--api-base", server["base"], "--api-key-env", KEY_ENV)
    common += ("--api-tokenizer", str(server["gguf"]), "--context", "16")
    result = run("score", str(doc), "--methods", "loss,minkpp", "--format", "json", *common)
    assert_clean_error(result, "method 'minkpp' needs the Min-K%++ moments")
    assert "with it use loss, zlib" in result.stderr and "--backend transformers or llamacpp" in result.stderr
    members, nonmembers = tmp_path / "m", tmp_path / "n"
    for folder, ids in ((members, corpus_ids("members", 2)), (nonmembers, corpus_ids("nonmembers", 2))):
        folder.mkdir()
        for i in ids:
            (folder / f"{i}.txt").write_text(corpus_text(folder.name == "m" and "members" or "nonmembers", i, 300))
    result = run(
        "train",
        "--members",
        members,
        "--nonmembers",
        nonmembers,
        "--norm",
        "max_gp",
        "--features",
        "hist",
        "--folds",
        "2",
        "--out",
        tmp_path / "c",
        *common,
    )
    assert_clean_error(result, "normalization 'max_gp' needs the GP sums")
    ok = run("score", str(doc), "--format", "json", *common)  # the default methods: those the API serves
    assert ok.exit_code == 0, ok.output
    assert "loss" in json.loads(ok.stdout)["rows"][0] and "minkpp" not in json.loads(ok.stdout)["rows"][0]


def test_max_requests_is_checked_before_querying(server, api_key, tmp_path):
    from docaudit.corpus.documents import load_documents
    from docaudit.query.querier import query_documents

    docs = []
    for i, text in enumerate((sample(600), sample(900))):
        (tmp_path / f"{i}.txt").write_text(text)
    docs = load_documents([tmp_path], progress=False)
    lm = load_model(api(server, api_tokenizer=str(server["gguf"]), max_requests=8))
    querier = Querier(lm, QueryConfig(context=16, gp=False))
    before = lm.model.requests
    with pytest.raises(DocauditError, match=r"needs up to \d+ requests, more than --max-requests 8"):
        query_documents(querier, docs, progress=False)
    assert lm.model.requests == before


def test_wrong_key_unreachable_server_and_tokenizer_mismatch(server, monkeypatch, tiny_gpt2):
    monkeypatch.setenv(KEY_ENV, "wrong")
    with pytest.raises(DocauditError, match="answered 401") as e:
        load_model(api(server, api_tokenizer=str(server["gguf"])))
    assert "wrong" not in str(e.value)
    monkeypatch.setenv(KEY_ENV, KEY)
    port = _free_port()
    with pytest.raises(DocauditError, match=f"cannot reach http://127.0.0.1:{port}/v1/models"):
        load_model(
            ModelConfig(
                backend="openai",
                api_base=f"http://127.0.0.1:{port}/v1",
                api_retries=1,
                api_backoff=0.01,
                api_tokenizer=str(server["gguf"]),
            )
        )
    with pytest.raises(DocauditError, match="does not tokenize as the server does"):
        load_model(api(server, api_tokenizer=str(tiny_gpt2)))
    with pytest.raises(DocauditError, match="needs the served model's tokenizer"):
        load_model(api(server))


def test_evaluate_through_the_api_counts_requests(server, api_key, tmp_path):
    members, nonmembers = tmp_path / "m", tmp_path / "n"
    for folder, kind in ((members, "members"), (nonmembers, "nonmembers")):
        folder.mkdir()
        for i in corpus_ids(kind, 4):
            (folder / f"{i}.txt").write_text(corpus_text(kind, i, 400))
    result = run(
        "evaluate", "--members", members, "--nonmembers", nonmembers, "--folds", "2", "--trees", "10",
        "--sequences", "2", "--no-blind", "--norm", "max_tf", "--features", "agg",
        "--backend", "openai", "--api-base", server["base"],
        "--api-key-env", KEY_ENV, "--api-tokenizer", server["gguf"], "--context", "32", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["info"]["requests"] > 8 and KEY not in result.stdout
    methods = {row["method"] for row in out["methods"]}
    assert "minkpp" not in methods and {"loss", "meta_classifier"} <= methods


def test_model_as_url(server, api_key):
    lm = load_model(
        ModelConfig(
            backend="openai", model=server["base"] + "#tiny", api_tokenizer=str(server["gguf"]), api_key_env=KEY_ENV
        )
    )
    assert (lm.config.api_base, lm.config.api_model, lm.identity) == (
        server["base"],
        "tiny",
        f"openai:{server['base']}#tiny",
    )
    with pytest.raises(DocauditError, match="does not serve 'other'"):
        load_model(api(server, api_tokenizer=str(server["gguf"]), api_model="other"))


def test_without_bos_the_search_replaces_llama_cpp_python_echo(tmp_path, api_key):
    """llama-cpp-python's echo is shifted by one token when the prompt has no BOS: auto mode searches instead,
    echo is refused, and the search agrees with in-process llama.cpp."""
    gguf = write_gguf(make_model(tmp_path / "hf", "llama"), tmp_path / "nobos.gguf", add_bos=False)
    process, base = _serve(gguf)
    try:
        config = ModelConfig(backend="openai", api_base=base, api_key_env=KEY_ENV, api_tokenizer=str(gguf))
        lm = load_model(config)
        assert lm.model.mode == "logit_bias"
        with pytest.raises(DocauditError, match="misaligns echoed log-probabilities"):
            load_model(replace(config, api_logprobs="echo"))
        query, text = QueryConfig(context=16, gp=False), sample(50)
        remote = Querier(lm, query).stats(text)
    finally:
        process.terminate()
        process.wait(10)
    local = Querier(load_model(ModelConfig(model=str(gguf), backend="llamacpp")), query).stats(text)
    assert np.array_equal(remote.token_ids, local.token_ids)
    assert np.abs(remote.logp - local.logp).max() < 1e-3
