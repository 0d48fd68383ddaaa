"""Hostile servers on 127.0.0.1, started and stopped here: compression bombs are refused in bounded memory (checked
in a subprocess under an address-space limit), a ``Retry-After`` never outlasts the deadlines the user chose, and a
failing document stops the requests still in flight."""

import json
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hostile import hostile_server
from test_cli import assert_clean_error, run

from docaudit.errors import MODEL_UNAVAILABLE

REPO = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 1 << 30  # bytes of address space a bounded client runs in; the bombs inflate to GIB_BOMB or more
GIB_BOMB = 1 << 30
HANG_GUARD = 60  # seconds: a guard that turns a hang into a failure, far above any deadline tested here


def gzip_of_zeros(n_bytes: int) -> bytes:
    """A gzip stream of ``n_bytes`` zero bytes (no trailer: a decoder inflates everything before it), built from
    one fully flushed 16 MiB block repeated, so a GiB costs milliseconds."""
    block = bytes(1 << 24)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    repeated = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    return first + repeated * (n_bytes // len(block) - 1)


def gzip(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


class BombHandler(BaseHTTPRequestHandler):
    """Every GET answered with the server's ``body`` under its ``encoding``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Encoding", self.server.encoding)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)


@contextmanager
def bomb_server(body: bytes, encoding: str):
    server = ThreadingHTTPServer(("127.0.0.1", 0), BombHandler)
    server.daemon_threads, server.block_on_close = True, False
    server.body, server.encoding = body, encoding
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


LIMITED = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    {body}
    """
)


def run_limited(body: str, *args) -> subprocess.CompletedProcess:
    """``body`` in a fresh Python whose address space is capped at ``MEMORY_LIMIT`` bytes."""
    code = LIMITED.format(limit=MEMORY_LIMIT, body=textwrap.dedent(body))
    env = {"PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=HANG_GUARD, env=env
    )


CLIENT = """
from docaudit import net
try:
    answer = net.request(net.client(), "GET", sys.argv[1], 30)
    print(json.dumps({"ok": len(answer.content)}))
except (net.Unacceptable, MemoryError) as e:
    print(json.dumps({type(e).__name__: str(e)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "encoding, inner, message",
    [
        ("gzip, gzip", True, "encoded as gzip, gzip: only one gzip or deflate encoding is accepted"),
        ("gzip", False, "more than the 268435456 bytes allowed"),
    ],
)
def test_a_compression_bomb_is_refused_in_bounded_memory(encoding, inner, message):
    """A few KB on the wire that inflate to a GiB: refused without ever holding more than the answer's limit."""
    bomb = gzip_of_zeros(GIB_BOMB)
    body = gzip(bomb) if inner else bomb
    assert len(body) < 2 << 20
    with bomb_server(body, encoding) as url:
        result = run_limited(CLIENT, url + "/book.txt")
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert "MemoryError" not in answer and message in next(iter(answer.values())), answer


def test_one_gzip_or_deflate_encoding_is_read_and_others_are_refused():
    from docaudit import net

    text = b"It was the best of times. " * 4000
    raw_deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    cases = {
        "gzip": gzip(text),
        "deflate": zlib.compress(text),
        "identity": text,
    }
    for encoding, body in cases.items():
        with bomb_server(body, encoding) as url:
            assert net.request(net.client(), "GET", url, 10).content == text, encoding
    with bomb_server(raw_deflate.compress(text) + raw_deflate.flush(), "deflate") as url:
        assert net.request(net.client(), "GET", url, 10).content == text
    for encoding in ("br", "gzip, gzip", "deflate, gzip", "x-unknown"):
        with bomb_server(text, encoding) as url, pytest.raises(net.Unacceptable, match="only one gzip or deflate"):
            net.request(net.client(), "GET", url, 10)


FETCHER = """
sys.argv = ["fetch_gutenberg.py", *sys.argv[1:]]
import runpy
try:
    runpy.run_path({script!r}, run_name="__main__")
except MemoryError:
    print("MemoryError")
    raise SystemExit(99)
"""


@pytest.mark.slow
def test_the_fetcher_refuses_a_nested_gzip_bomb_in_bounded_memory(tmp_path):
    from docaudit.corpus.manifest import ManifestRow, write_manifest

    manifest = tmp_path / "m.csv"
    write_manifest([ManifestRow("2719", "member", path="members/2719.txt")], manifest)
    with bomb_server(gzip(gzip_of_zeros(2 * GIB_BOMB)), "gzip, gzip") as url:
        result = run_limited(
            FETCHER.format(script=str(REPO / "scripts" / "artifacts" / "fetch_gutenberg.py")),
            *("--manifest", manifest, "--out", tmp_path / "out", "--mirror", url, "--no-progress", "--retries", 0),
        )
    assert result.returncode == 1, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert "only one gzip or deflate encoding is accepted" in result.stderr
    assert not (tmp_path / "out" / "members" / "2719.txt").exists()


# --- Retry-After and requests in flight ----------------------------------------------------------------------------


def timed_score(doc, server, tiny_gpt2, *extra):
    options = ("--backend", "openai", "--api-base", server.base, "--api-tokenizer", tiny_gpt2)
    options += ("--api-logprobs", "echo", "--context", "16", "--max-tokens", "40", "--methods", "loss")
    start = time.monotonic()
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=run("score", doc, *options, *extra)), daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    assert not thread.is_alive(), f"still running after {HANG_GUARD} s"
    return box["result"], time.monotonic() - start


@pytest.mark.parametrize("where", ["models", "completions"])
def test_retry_after_never_outlasts_the_deadlines(tokenizer, tiny_gpt2, doc, where):
    """A 429 asking for an hour's wait, at load time (``/models``) or on a document: the run fails at once with one
    line, inside the deadlines the user chose."""
    with hostile_server(tokenizer, f"retry-after-{where}") as server:
        result, seconds = timed_score(
            doc, server, tiny_gpt2, "--api-timeout", "2", "--api-retries", "1", "--api-document-timeout", "5"
        )
    assert_clean_error(result, "asks to wait 3600 s before trying again (Retry-After)")
    assert result.exit_code == MODEL_UNAVAILABLE  # one cause, one status, at load time or on a document
    assert seconds < 5 + 10  # the document's 5 s and the command's own start, far from the hour asked


def test_the_load_is_bounded_by_the_document_timeout(tokenizer, tiny_gpt2, doc):
    """A server that answers ``/models`` with 503 and a short Retry-After, forever: the load stops when
    ``--api-document-timeout`` is spent, however many retries are allowed."""
    with hostile_server(tokenizer, "busy-models") as server:
        result, seconds = timed_score(
            doc, server, tiny_gpt2, "--api-timeout", "2", "--api-retries", "50", "--api-document-timeout", "3"
        )
    assert_clean_error(result, "allowed per document (--api-document-timeout)")
    assert sum(path == "/v1/models" for path, _ in server.seen) < 10


def test_a_failing_window_stops_the_requests_in_flight(tokenizer, tiny_gpt2, doc):
    """One window's request fails at once (a 404) while the others hang: the document fails without waiting for
    the hanging requests (each allowed 8 s and a retry)."""
    with hostile_server(tokenizer, "fail-one") as server:
        result, seconds = timed_score(doc, server, tiny_gpt2, "--api-timeout", "8", "--api-retries", "1")
    assert_clean_error(result, "answered 404")
    assert seconds < 8 + 6  # not the 16 s of the hanging requests' two tries
