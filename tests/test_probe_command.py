"""``docaudit probe`` against real servers on 127.0.0.1: llama-cpp-python's server (its chat endpoint, which
returns no log-probabilities) with a tiny Llama, and with the embedded Gemma (slow); crafted servers (slow, huge,
malformed, rate-limiting) get a one-line error within the deadline; a stopped run resumes from the cache."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from conftest import CORPUS, make_model
from hostile import hostile_server
from test_cli import assert_clean_error, run

pytest.importorskip("llama_cpp.server.app")
pytest.importorskip("nltk")
pytest.importorskip("sacremoses")
pytest.importorskip("unidecode")

import reference_probes as ref  # noqa: E402
from test_backends_openai import KEY, KEY_ENV, _serve  # noqa: E402
from test_gguf import write_gguf  # noqa: E402

from docaudit.audit.probes import NGRAM_INSTRUCTION, ngram_passages  # noqa: E402
from docaudit.config import ModelConfig, ProbeConfig  # noqa: E402
from docaudit.errors import ModelError  # noqa: E402
from docaudit.query.chat import Ask, served_writer  # noqa: E402

HANG_GUARD = 60
FAST = ("--passages", "2", "--samples", "2", "--prompt-words", "20", "--continuation-words", "20")
FAST += ("--new-tokens", "12", "--min-library", "10", "--format", "json")


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory):
    """The tiny Llama as a GGUF, served by llama-cpp-python with 1024 positions and an API key."""
    directory = tmp_path_factory.mktemp("chat")
    gguf = write_gguf(make_model(directory / "hf", "llama"), directory / "tiny.gguf")
    process, base = _serve(gguf, n_ctx=1024)
    yield base
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def texts():
    """Two books and a library of 20 never-seen texts (the fewest whose smallest p-value, 1/21, is below 0.05), by
    path in the shared corpus."""
    books = sorted((CORPUS / "members").glob("*.txt"))[:2]
    library = sorted((CORPUS / "nonmembers").glob("*.txt"))[:20]
    return books, library


def probe_json(*args):
    result = run("probe", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def library_args(library):
    return [a for path in library for a in ("--null-library", path)]


def test_ngram_probe_gives_each_book_a_verdict_over_the_chat_endpoint(chat_server, texts, monkeypatch):
    """A run stopped by --max-requests keeps what it was answered; the next one asks only for the rest, and every
    book gets a verdict with its rank p-value against the library's statistics at its passage count (recomputed
    here), the null stated; a third run sends nothing and gives the same numbers; the answers are a cache kind of
    their own."""
    from test_schemas import validate

    monkeypatch.setenv(KEY_ENV, KEY)
    books, library = texts
    server = ("--api-base", chat_server, "--api-key-env", KEY_ENV, "--api-model", "tiny")
    stopped = run("probe", *books, *library_args(library), *server, *FAST, "--max-requests", "50")
    assert_clean_error(stopped, "--max-requests 50 reached")
    kept = cache_entries("generations")
    assert 40 <= kept <= 49  # the models list took one request; a few in flight were cancelled
    out = probe_json(*books, *library_args(library), *server, *FAST)
    validate(out, "probe")
    assert out["writer"]["requests"] == 22 * 2 * 2 - kept  # texts, passages, samples
    assert out["probe"] == "ngram" and "H0:" in out["null"] and "quotations" in out["null"]
    assert out["smallest_p"] == pytest.approx(1 / 21)
    null = np.array([np.mean(t["values"]) for t in out["library"]])
    for book in out["books"]:
        # two books against 20 texts: beside a book at p >= 0.05, not even 1/21 reaches q < 0.05 over the run
        reached = book["verdict"] in ("evidence of membership", "no evidence of membership")
        assert reached or book["reason_codes"] == ["unreachable_in_run"], book["reason"]
        assert book["compared_at"] == book["passages"] == 2 and book["library_texts"] == 20
        expected = (1 + np.sum(null >= book["statistic"] - 1e-12)) / (len(null) + 1)
        assert book["p_value"] == pytest.approx(expected)
        assert book["requests"] + book["cached"] == 2 * 2
    again = probe_json(*books, *library_args(library), *server, *FAST)
    assert [b["requests"] for b in again["books"]] == [0, 0]
    assert [b["cached"] for b in again["books"]] == [4, 4]
    assert [b["p_value"] for b in again["books"]] == [b["p_value"] for b in out["books"]]
    assert cache_entries("generations") == 22 * 2 * 2
    rates = cache_entries("rates")  # this server's seconds per request, kept when the run took a second or more
    done = run("cache", "clear", "--kind", "generations", "--yes")
    assert done.exit_code == 0 and "removed 88 entries" in done.stdout
    assert cache_entries("generations") == 0 and cache_entries("rates") == rates


def cache_entries(kind: str) -> int:
    done = run("cache", "info", "--format", "json")
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["kinds"][kind]["entries"]


def test_the_statistic_of_real_generations_matches_the_authors_code(chat_server, texts, monkeypatch):
    """The continuations the served model wrote (read back from the cache) give, through the authors' code, the
    per-passage creativity index the probe reported."""
    monkeypatch.setenv(KEY_ENV, KEY)
    books, _ = texts
    server = ("--api-base", chat_server, "--api-key-env", KEY_ENV, "--api-model", "tiny")
    out = probe_json(books[0], *server, *FAST)
    [book] = out["books"]
    assert book["verdict"] == "inconclusive" and book["reason_codes"] == ["no_library"] and book["p_value"] is None
    from docaudit.corpus.documents import load_documents

    config = ProbeConfig(passages=2, samples=2, prompt_words=20, continuation_words=20, new_tokens=12)
    [doc] = load_documents([books[0]])
    writer = served_writer(ModelConfig(api_base=chat_server, api_model="tiny", api_key_env=KEY_ENV), "chat")
    passages = ngram_passages(doc.text, doc.sha256, config, 0)
    written = writer.write([Ask(NGRAM_INSTRUCTION + o, 2, 12, 1.0, 0) for o, _ in passages])
    assert writer.sent == 0  # all of it from the cache: the same generations
    values = []
    for generations, (_, real) in zip(written, passages):
        theirs = [ref.process_generation(g, real) for g in generations]
        ci = ref.compute_modified_creativity_index(theirs, 2, 12, ref.reference_length(real))
        values.append(max(c["creativities_gen_length"] for c in ci))
    assert values == pytest.approx(book["values"], abs=1e-9)
    assert np.mean(values) == pytest.approx(book["statistic"], abs=1e-9)


def test_decop_on_a_model_that_cannot_answer_is_inconclusive(chat_server, texts, tmp_path, monkeypatch):
    """The tiny model answers the multiple-choice questions with noise: every book is "inconclusive" (its answers
    unreadable, or the library's accuracy at the position-bias floor), never evidence."""
    monkeypatch.setenv(KEY_ENV, KEY)
    books, library = texts
    from docaudit.corpus.documents import load_documents

    lines = []
    for doc in load_documents([*books, *library]):
        words = doc.text.split()
        passage = " ".join(words[5000:5012])
        lines.append({"passage": passage, "paraphrases": [f"{passage} ({i})" for i in range(3)]})
    paraphrases = tmp_path / "paraphrases.jsonl"
    paraphrases.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    server = ("--api-base", chat_server, "--api-key-env", KEY_ENV, "--api-model", "tiny")
    out = probe_json(
        *books,
        *library_args(library),
        *server,
        "--probe",
        "decop",
        "--paraphrases",
        paraphrases,
        "--min-library",
        "3",
        "--max-unreadable",
        "1",
        "--format",
        "json",
    )
    for book in out["books"]:
        assert book["verdict"] == "inconclusive", book
        assert book["passages"] == 1 and book["requests"] == 24
        assert set(book["reason_codes"]) & {"model_cannot_answer", "unreadable_answers"}


def test_dry_run_sends_nothing_and_states_requests_tokens_time_and_price(texts):
    """--dry-run against a port nothing listens on: the plan, no connection tried."""
    books, library = texts
    result = run(
        "probe",
        *books,
        *library_args(library),
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--passages",
        "4",
        "--samples",
        "3",
        "--price-prompt",
        "1e-6",
        "--price-completion",
        "2e-6",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    requests = 22 * 4 * 3  # texts, passages, samples
    sent = requests * (50 * 1.4 + len(NGRAM_INSTRUCTION.split()))
    assert f"at most {requests} requests to http://127.0.0.1:9/v1" in result.stdout
    assert f"about {sent:,.0f} tokens sent and at most {requests * 96:,} received" in result.stdout
    assert f"about {sent * 1e-6 + requests * 96 * 2e-6:.4g} at the prices given" in result.stdout
    assert f"about {requests * 8.9:,.0f} s (8.9 s per request, documented: none measured here yet;" in result.stdout
    assert "nothing was sent" in result.stdout and "at the prices given" in result.stdout


def timed_probe(base, *extra):
    box = {}
    start = time.monotonic()
    args = ("--api-base", base, "--passages", "1", "--samples", "1", *extra)
    thread = threading.Thread(target=lambda: box.update(result=run("probe", *args)), daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    assert not thread.is_alive(), f"still running after {HANG_GUARD} s"
    return box["result"], time.monotonic() - start


@pytest.mark.parametrize(
    "mode, message",
    [
        ("trickle", "gave no complete answer within 2 s (--api-timeout)"),
        ("flood", "more than the"),
        ("html", "answered text/html, not JSON"),
        ("list", "answered a JSON list, not an object"),
        ("nochoices", "answered without a text"),
        ("notext", "answered without a text"),
        ("retry-after-completions", "asks to wait 3600 s before trying again (Retry-After)"),
        ("models", "answered no list of models"),
    ],
)
def test_a_crafted_server_gets_a_one_line_error_within_the_deadline(tokenizer, texts, mode, message):
    books, _ = texts
    with hostile_server(tokenizer, mode) as server:
        result, seconds = timed_probe(
            server.base, books[0], "--api-timeout", "2", "--api-retries", "1", "--api-document-timeout", "6"
        )
    assert_clean_error(result, message)
    assert seconds < 6 + 15  # the text's 6 s and the command's own start
    assert all(path.startswith("/v1/") for path, _ in server.seen)


def test_a_generation_answer_larger_than_its_bound_is_refused(tokenizer):
    with hostile_server(tokenizer, "flood") as server:
        writer = served_writer(ModelConfig(api_base=server.base, api_retries=0), "chat")
        with pytest.raises(ModelError, match="more than the"):
            writer.write([Ask("Once upon a time", 1, 8, 1.0, 0)])


def test_a_model_run_here_is_probed_without_a_server(tiny_gpt2, texts):
    """No --api-base: the model runs in this process (pure sampling of exactly --new-tokens), its continuations
    cached as the served ones are; DE-COP's paraphrases written by a paraphrasing model run here."""
    books, library = texts
    args = (books[0], *library_args(library[:3]), "--model", tiny_gpt2, "--min-library", "3", "--alpha", "0.3")
    out = probe_json(*FAST, *args)
    [book] = out["books"]
    assert out["writer"]["endpoint"] == "in-process" and out["writer"]["requests"] == 0
    assert (
        book["passages"] == 2
        and book["cached"] == 0
        and book["p_value"]
        == pytest.approx((1 + sum(np.mean(t["values"]) >= book["statistic"] - 1e-12 for t in out["library"])) / 4)
    )
    assert probe_json(*FAST, *args)["books"][0]["cached"] == 2 * 2  # every sample from the cache
    decop = probe_json(
        books[0],
        "--model",
        tiny_gpt2,
        "--paraphraser",
        tiny_gpt2,
        "--probe",
        "decop",
        "--passages",
        "1",
        "--decop-words",
        "8",
        "--format",
        "json",
    )
    [book] = decop["books"]
    assert book["verdict"] == "inconclusive" and "no_library" in book["reason_codes"]
    assert book["passages"] in (0, 1) and (book["passages"] == 0 or book["unreadable"] is not None)


@pytest.mark.slow
def test_the_embedded_gemma_served_by_llama_cpp_python(texts, tmp_path, monkeypatch):
    """The embedded Gemma behind llama-cpp-python's chat endpoint (its GGUF's chat template): continuations come
    back and are counted by the server's usage; DE-COP's 24 questions of a passage are asked and each answer read
    or counted unreadable."""
    from docaudit.corpus.documents import load_documents
    from docaudit.query.sources import embedded_gguf

    gguf, _ = embedded_gguf()
    process, base = _serve(gguf, n_ctx=1024)
    monkeypatch.setenv(KEY_ENV, KEY)
    try:
        books, _ = texts
        server = ("--api-base", base, "--api-key-env", KEY_ENV, "--api-model", "tiny")
        out = probe_json(books[0], *server, *FAST)
        [book] = out["books"]
        assert book["requests"] == 4 and 0 < book["tokens_received"] <= 4 * 12 and book["tokens_sent"] > 4 * 20
        assert book["statistic"] is not None and book["reason_codes"] == ["no_library"]
        words = load_documents([books[0]])[0].text.split()
        passage = " ".join(words[3000:3016])
        paraphrases = [" ".join(words[k : k + 16]) for k in (4000, 5000, 6000)]
        path = tmp_path / "paraphrases.jsonl"
        path.write_text(json.dumps({"passage": passage, "paraphrases": paraphrases}), encoding="utf-8")
        decop = probe_json(books[0], *server, "--probe", "decop", "--paraphrases", path, "--format", "json")
        [book] = decop["books"]
        assert book["requests"] == 24 and book["passages"] == 1 and 0 <= book["unreadable"] <= 1
    finally:
        process.terminate()
        process.wait(10)


def test_the_completions_endpoint_gets_the_opening_alone(chat_server, texts, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    books, _ = texts
    server = ("--model", chat_server, "--api-key-env", KEY_ENV, "--endpoint", "completions")  # a URL as --model
    out = probe_json(books[0], *server, *FAST, "--passages", "1", "--samples", "1")
    assert out["writer"]["endpoint"] == "completions" and out["books"][0]["requests"] == 1
    assert out["writer"]["identity"].startswith(f"openai:{chat_server}#tiny@")  # the one model served, named


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "line 1: not a JSON object with a 'passage' and three non-empty 'paraphrases'"),
        ('{"passage": "a b", "paraphrases": ["x", "y"]}', "line 1: not a JSON object"),
        ('{"passage": "a b", "paraphrases": ["x", "y", ""]}', "line 1: not a JSON object"),
    ],
)
def test_a_malformed_paraphrase_file_is_a_one_line_error_before_any_request(texts, tmp_path, line, message):
    books, _ = texts
    path = tmp_path / "paraphrases.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    result = run("probe", books[0], "--probe", "decop", "--paraphrases", path, "--api-base", "http://127.0.0.1:9/v1")
    assert_clean_error(result, message)
