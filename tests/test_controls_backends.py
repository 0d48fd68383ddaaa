"""``controls`` and ``map`` through llama.cpp in process and through a server that scores given text, against the
transformers path on the same float32 weights: llama-cpp-python's server started here on 127.0.0.1 with a tiny
float32 GGUF written from a config-built Llama (``test_backends_openai.server``), and the same GGUF in process. A
chat-only server (the same server without its completions routes) is refused, naming ``docaudit probe``."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import numpy as np
import pytest
import test_backends_openai
from conftest import corpus_ids, corpus_text, shelf_of
from test_backends_openai import KEY, KEY_ENV, _serve, api
from test_cli import assert_clean_error, run
from test_controls import SMALL_ARGS

from docaudit.config import ModelConfig
from docaudit.query.conditional import bits_per_byte
from docaudit.query.generate import continuation_texts, continuations
from docaudit.query.models import load_model

pytest.importorskip("llama_cpp.server.app")

server, api_key = test_backends_openai.server, test_backends_openai.api_key  # its fixtures: one server a session

TOLERANCE = 1e-3  # nats per token: llama.cpp against transformers on float32 weights (docs/benchmarks.md)


@pytest.fixture(scope="module")
def models(server, one_thread):
    """The served tiny Llama's weights loaded here by transformers and by llama.cpp."""
    return (
        load_model(ModelConfig(model=str(server["hf"]), device="cpu")),
        load_model(ModelConfig(model=str(server["gguf"]), backend="llamacpp")),
    )


@pytest.fixture(scope="module")
def shelf(tmp_path_factory):
    root = tmp_path_factory.mktemp("shelf")
    shelf_of(root, {"books": ("members", 2), "library": ("nonmembers", 3)}, n_chars=3000)
    return root


def served_args(server) -> list:
    return ["--backend", "openai", "--api-base", server["base"], "--api-key-env", KEY_ENV]


def _prompts(lm, n: int, length: int) -> list[list[int]]:
    ids = list(lm.tokenizer(corpus_text("members", corpus_ids("members", 1)[0]), add_special_tokens=False).input_ids)
    return [ids[k * 40 : k * 40 + length] for k in range(n)]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_llamacpp_samples_what_transformers_samples(models, temperature):
    """Each row from its own uniforms through the one sampler: llama.cpp's logits give the transformers path's
    tokens, whatever the batch (a prompt at a time in llama.cpp, three per loop in transformers)."""
    hf, cpp = models
    prompts = _prompts(hf, 4, 16)
    options = {"temperature": temperature, "seed": 11, "batch_size": 3}
    ours = continuations(cpp, prompts, 3, 12, options)
    assert ours == continuations(hf, prompts, 3, 12, options)
    assert len({tuple(r) for rows in ours for r in rows}) == 12  # every row its own draw
    assert continuations(cpp, prompts[1:2], 3, 12, options)[0] != ours[1]  # the prompt's index keys its uniforms


def test_bits_per_byte_through_llamacpp_and_the_server(models, server, api_key):
    hf, cpp = models
    served = load_model(api(server, api_tokenizer=str(server["gguf"])))
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=380)  # within the server's 256 positions
    cut = [text.index(" ", k) for k in (30, 120, 200)]  # at spaces: the joined text tokenizes as the parts
    pairs = [(text[: cut[1]], text[cut[1] : cut[2]]), (text[: cut[0]], " and then"), (text[: cut[2]], text[cut[2] :])]
    pairs += [("", "x"), (text[:40], "")]
    reference = bits_per_byte(hf, pairs, batch_size=2)
    local, remote = bits_per_byte(cpp, pairs), bits_per_byte(served, pairs)
    assert np.isnan(reference[3:]).all() and np.isnan(local[3:]).all() and np.isnan(remote[3:]).all()
    seam = text.index(" ", 60) - 2  # inside a word: a server reads the text, which tokenizes otherwise there
    inside = [(text[:seam], text[seam : seam + 80])]
    assert np.isfinite(bits_per_byte(cpp, inside)).all() and np.isnan(bits_per_byte(served, inside)).all()
    for (_, suffix), a, b, c in zip(pairs[:3], reference, local, remote):
        tokens = len(hf.tokenizer(suffix, add_special_tokens=False).input_ids)
        bound = TOLERANCE * tokens / math.log(2) / len(suffix.encode("utf-8"))  # TOLERANCE nats per token
        assert abs(b - a) < bound and abs(c - b) < 1e-4 * bound / TOLERANCE, (a, b, c)


def test_controls_through_llamacpp_agrees_with_transformers(server, shelf):
    """The whole command through llama.cpp (generation and scoring) gives the transformers run's suffixes, hence
    its contrasts to float noise and the same p-values."""
    common = [shelf / "books", "--null-library", shelf / "library", *SMALL_ARGS, "--min-library", "3"]
    common += ["--format", "json"]
    hf, gguf = str(server["hf"]), str(server["gguf"])
    reference = run("controls", *common, "--model", hf, "--generator", hf, "--device", "cpu")
    ours = run("controls", *common, "--model", gguf, "--generator", gguf, "--backend", "llamacpp")
    assert reference.exit_code == 0 and ours.exit_code == 0, reference.output + ours.output
    a, b = json.loads(reference.stdout), json.loads(ours.stdout)
    assert b["generator"]["backend"] == "llamacpp" and a["generator"]["backend"] == "transformers"
    assert all(row["tokens_generated"] > 0 for row in b["books"])  # its own suffixes, not the transformers run's
    for x, y in zip(a["books"], b["books"]):
        assert x["sha256"] == y["sha256"] and abs(x["contrast"] - y["contrast"]) < TOLERANCE, (x, y)
    for x, y in zip(a["library"], b["library"]):
        assert np.abs(np.subtract(x["deltas"], y["deltas"])).max() < TOLERANCE
    assert [x["p_value"] for x in a["books"]] == [y["p_value"] for y in b["books"]]


def test_controls_through_a_scoring_server(server, api_key, shelf):
    args = [shelf / "books", "--null-library", shelf / "library", *SMALL_ARGS, "--min-library", "3"]
    args += [*served_args(server), "--api-tokenizer", server["gguf"], "--format", "json"]
    first = run("controls", *args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    assert out["generator"]["backend"] == "openai" and out["generator"]["device"] == "server"
    assert all(b["tokens_generated"] > 0 and math.isfinite(b["contrast"]) for b in out["books"])
    again = json.loads(run("controls", *args).stdout)
    assert all(b["tokens_generated"] == 0 for b in again["books"])  # the server's suffixes came from the cache
    assert [b["contrast"] for b in again["books"]] == [b["contrast"] for b in out["books"]]


def test_served_continuations_are_seeded_and_greedy_at_a_tiny_temperature(models, server, api_key):
    hf, _ = models
    served = load_model(api(server, api_tokenizer=str(server["gguf"])))
    prompts = _prompts(hf, 2, 16)
    options = {"temperature": 1.0, "seed": 5, "batch_size": 2}
    first = continuation_texts(served, prompts, 2, 10, options)
    assert first == continuation_texts(served, prompts, 2, 10, options)  # each row's own seed, honoured
    assert first != continuation_texts(served, prompts, 2, 10, {**options, "seed": 6})
    assert first[0][0] != first[0][1]
    greedy = {**options, "temperature": 1e-4}  # both samplers then take the top token: the same tokens

    def letters(texts):  # the engines space and render partial UTF-8 sequences (byte tokens) apart
        return [["".join(t.split()).replace("\ufffd", "") for t in rows] for rows in texts]

    served_greedy = letters(continuation_texts(served, prompts, 1, 10, greedy))
    assert served_greedy == letters(continuation_texts(hf, prompts, 1, 10, greedy)) and all(served_greedy[0])


@pytest.fixture(scope="module")
def chat_only(server):
    """The same model behind llama-cpp-python's server without its completions routes: it serves chat alone."""
    process, base = _serve(server["gguf"], chat_only=True)
    yield base
    process.terminate()
    process.wait(10)


def _post(url: str, body: dict) -> int:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    try:
        return urllib.request.urlopen(
            urllib.request.Request(url, json.dumps(body).encode(), headers), timeout=30
        ).status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_chat_only_server_is_refused_naming_probe(chat_only, server, api_key, shelf):
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 2}
    assert _post(f"{chat_only}/chat/completions", chat) == 200
    assert _post(f"{chat_only}/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 2}) == 404
    args = [shelf / "books", "--null-library", shelf / "library", *SMALL_ARGS, "--min-library", "3"]
    args += ["--backend", "openai", "--api-base", chat_only, "--api-key-env", KEY_ENV]
    result = run("controls", *args, "--api-tokenizer", server["gguf"])
    assert_clean_error(result, "without prompt log-probabilities")
    assert result.exit_code == 4 and "docaudit probe" in result.stderr
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


@pytest.fixture(scope="module")
def map_shelf(tmp_path_factory):
    """One judged book and six calibration books, each cut into runs of 60 words."""
    root = tmp_path_factory.mktemp("map")
    shelf_of(root, {"books": ("members", 1), "calibration": ("nonmembers", 6)}, n_chars=1500)
    return root


def test_map_through_llamacpp_and_a_scoring_server(server, api_key, map_shelf):
    args = ["map", map_shelf / "books", "--calibrate-nonmembers", map_shelf / "calibration", "--context", "32"]
    args += ["--segment-words", "60", "--min-segment-tokens", "16", "--alpha", "0.2", "--format", "json"]
    for method in ("minkpp", "loss"):
        reference = run(*args, "--method", method, "--model", server["hf"], "--device", "cpu")
        ours = run(*args, "--method", method, "--model", server["gguf"], "--backend", "llamacpp")
        assert reference.exit_code == 0 and ours.exit_code == 0, reference.output + ours.output
        a, b = json.loads(reference.stdout)["rows"], json.loads(ours.stdout)["rows"]
        assert len(a) == len(b) >= 2 and [x["p_value"] for x in a] == [y["p_value"] for y in b]
        assert max(abs(x["score"] - y["score"]) for x, y in zip(a, b)) < TOLERANCE
    served = [*served_args(server), "--api-tokenizer", server["gguf"]]
    assert_clean_error(run(*args, *served), "--method minkpp needs the Min-K%++ moments")
    remote = run(*args, *served, "--method", "loss")
    assert remote.exit_code == 0, remote.output
    c = json.loads(remote.stdout)["rows"]
    assert [x["p_value"] for x in c] == [y["p_value"] for y in b]
    assert max(abs(x["score"] - y["score"]) for x, y in zip(c, b)) < 1e-4
