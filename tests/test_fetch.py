"""The Project Gutenberg fetcher against a real HTTP server on 127.0.0.1 and against a local-folder mirror."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import logging
import pathlib
import threading
import urllib.parse

import pytest
from conftest import CORPUS, within

from docaudit.config import FetchConfig
from docaudit.corpus.fetch import (
    candidate_paths,
    candidate_urls,
    fetch_book,
    fetch_manifest,
    tree_dirs,
)
from docaudit.corpus.manifest import ManifestRow, write_manifest
from docaudit.errors import DocauditError

REPO = pathlib.Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "fetch_gutenberg", REPO / "scripts" / "artifacts" / "fetch_gutenberg.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# small books of the shared corpus, each placed under a different mirror layout (None: not on the mirror)
BOOKS = {
    "2719": ("members", "cache/epub/2719/pg2719.txt"),  # the first layout tried
    "53516": ("members", "files/53516/53516-0.txt"),
    "2052": ("members", "files/2052/2052.txt"),
    "74553": ("nonmembers", "ebooks/74553.txt.utf-8"),
    "8793": ("members", "8/7/9/8793/8793-0.txt"),  # directory tree, as on PG's mirrors
    "74953": ("nonmembers", "7/4/9/5/74953/74953.txt"),
    "7011": ("members", "cache/epub/7011/pg7011.txt"),  # corrupted on the mirror: sha256 mismatch
    "7159": ("members", None),  # missing: 404 under every layout
}
CORRUPTED, MISSING = "7011", "7159"


def _book(book_id: str) -> bytes:
    """The book's bytes from the shared corpus (copied at test time), or a stand-in text without the corpus."""
    group = BOOKS[book_id][0]
    f = CORPUS / group / f"{book_id}.txt"
    if f.is_file():
        return f.read_bytes()
    lines = [f"*** START OF THE PROJECT GUTENBERG EBOOK {book_id} ***", ""]
    lines += [f"Line {i} of book {book_id}, with some words in it." for i in range(200)]
    return "\n".join(lines + ["", f"*** END OF THE PROJECT GUTENBERG EBOOK {book_id} ***", ""]).encode("utf-8")


@pytest.fixture
def mirror(tmp_path):
    root = tmp_path / "mirror"
    rows = []
    for book_id, (group, rel) in BOOKS.items():
        data = _book(book_id)
        rows.append(
            ManifestRow(
                book_id,
                "member" if group == "members" else "nonmember",
                sha256=hashlib.sha256(data).hexdigest(),
                n_bytes=len(data),
                path=f"{group}/{book_id}.txt",
            )
        )
        if rel is not None:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data if book_id != CORRUPTED else data[:1000] + b"X" + data[1001:])
    return root, rows


HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Too many requests</title></head><body>"
    + b"Slow down. " * 200
    + b"</body></html>\n"
)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the mirror folder; ``flaky`` paths answer 503 a few times first, ``misbehave`` paths misbehave in
    the named way (until ``stop`` is set at the end of the test)."""

    requests: list[str]
    flaky: dict[str, int]
    misbehave: dict[str, str]
    stop: threading.Event

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send_slowly(self, raw: bytes):
        for i in range(len(raw)):  # one byte per second
            if self.stop.wait(1.0 if i else 0):
                return
            self.wfile.write(raw[i : i + 1])
            self.wfile.flush()

    def do_GET(self):
        path = urllib.parse.urlparse(self.path).path
        self.requests.append(path)
        if self.flaky.get(path, 0) > 0:  # answer 503 a few times first
            self.flaky[path] -= 1
            self.send_error(503, "busy")
            return
        how = self.misbehave.get(path)
        if how == "silent":  # accept the connection, never answer
            self.stop.wait()
        elif how == "trickle":  # the headers at once, then the body one byte per second
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self._send_slowly(b"x" * 1000)
        elif how == "trickle-head":  # even the status line one byte per second
            self._send_slowly(b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000)
        elif how in ("html", "html-as-text"):  # an error page answered with 200
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if how == "html" else "text/plain")
            self.send_header("Content-Length", str(len(HTML_PAGE)))
            self.end_headers()
            self.wfile.write(HTML_PAGE)
        elif how == "cut":  # announce more than is sent and close; the next request gets the file
            self.misbehave.pop(path)
            data = pathlib.Path(self.directory, path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data) + 1000))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
        else:
            super().do_GET()


@pytest.fixture
def server(mirror):
    root, _ = mirror
    handler = type("Handler", (_Handler,), {"requests": [], "flaky": {}, "misbehave": {}, "stop": threading.Event()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        handler.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


HANG_GUARD = 120  # seconds: a hang guard, far above any deadline tested here, not a speed claim


def _run_script(tmp_path, rows, url, *options):
    manifest = tmp_path / "m.csv"
    write_manifest(rows, manifest)
    args = ["--manifest", str(manifest), "--out", str(tmp_path / "out"), "--mirror", url, "--no-progress"]
    return _load_script().main(args + [str(o) for o in options])


def test_layouts():
    assert tree_dirs("12345") == ["1/2/3/4/12345", "1/2/3/4/5/12345"]
    assert tree_dirs("7") == ["0/7", "7/7"]
    assert candidate_paths("123") == [
        "cache/epub/123/pg123.txt",
        "files/123/123-0.txt",
        "files/123/123.txt",
        "ebooks/123.txt.utf-8",
        "1/2/123/123-0.txt",
        "1/2/123/123.txt",
        "1/2/3/123/123-0.txt",
        "1/2/3/123/123.txt",
    ]
    assert candidate_urls("https://mirror.example/pg/", "5")[0] == "https://mirror.example/pg/cache/epub/5/pg5.txt"


def test_fetch_over_http_with_failures_and_resume(mirror, server, tmp_path, capsys):
    root, rows = mirror
    url, handler = server
    manifest = tmp_path / "m.csv"
    write_manifest(rows, manifest)
    out = tmp_path / "out"
    script = _load_script()
    args = [
        "--manifest",
        str(manifest),
        "--out",
        str(out),
        "--mirror",
        url,
        "--workers",
        "3",
        "--retries",
        "2",
        "--backoff",
        "0.01",
        "--no-progress",
    ]
    assert script.main(args) == 1  # two books could not be fetched
    err = capsys.readouterr().err
    assert "8 books: 6 downloaded, 0 already present, 2 failed" in err
    assert f"FAILED {CORRUPTED}: " in err and "sha256 mismatch" in err
    assert f"FAILED {MISSING}: not found on the mirror" in err
    for row in rows:
        dest = out / row.path
        if row.id in (CORRUPTED, MISSING):
            assert not dest.exists()
        else:
            assert hashlib.sha256(dest.read_bytes()).hexdigest() == row.sha256
    assert not list(out.rglob(".*"))  # no temporary files left behind
    # the corrupted book was retried (3 rounds); the missing one was not (404 everywhere)
    assert handler.requests.count(f"/cache/epub/{CORRUPTED}/pg{CORRUPTED}.txt") == 3
    assert handler.requests.count(f"/cache/epub/{MISSING}/pg{MISSING}.txt") == 1

    # second run: the verified files are skipped without a request; the failures are tried again
    handler.requests.clear()
    good = root / f"files/{CORRUPTED}/{CORRUPTED}-0.txt"
    good.parent.mkdir(parents=True)
    good.write_bytes(_book(CORRUPTED))  # a good copy appears under another layout
    (out / "members/2052.txt").write_bytes(b"truncated")  # a file that fails the check is not replaced...
    config = FetchConfig(workers=2, retries=1, backoff=0.01)
    report = fetch_manifest(rows, out, url, config, progress=False)
    status = {r.id: r.status for r in report.results}
    assert [r.id for r in report.results] == [r.id for r in rows]  # manifest order
    assert status == {
        "2719": "skipped",
        "53516": "skipped",
        "2052": "failed",
        "74553": "skipped",
        "8793": "skipped",
        "74953": "skipped",
        CORRUPTED: "downloaded",
        MISSING: "failed",
    }
    assert all(r.verified for r in report.results if r.status != "failed") and not report.unverified
    assert not any("2719" in p or "53516" in p or "2052" in p for p in handler.requests)
    assert {r.id: r.source for r in report.downloaded}[CORRUPTED].endswith(f"/files/{CORRUPTED}/{CORRUPTED}-0.txt")
    assert "was left alone (sha256 mismatch" in {r.id: r.error for r in report.failed}["2052"]
    assert (out / "members/2052.txt").read_bytes() == b"truncated"
    res = fetch_book(rows[2], out, url, FetchConfig(overwrite=True))  # ...unless asked for
    assert res.status == "downloaded" and (out / "members/2052.txt").read_bytes() == _book("2052")


def test_transient_errors_are_retried(mirror, server, tmp_path):
    _, rows = mirror
    url, handler = server
    handler.flaky["/cache/epub/2719/pg2719.txt"] = 2  # 503 twice, then the file
    row = rows[0]
    slept = []
    config = FetchConfig(retries=3, backoff=0.5)
    res = fetch_book(row, tmp_path / "out", url, config, sleep=slept.append)
    assert res.status == "downloaded" and res.attempts == 3 and res.verified
    assert slept == [0.5, 1.0]  # exponential backoff between rounds
    res = fetch_book(rows[-1], tmp_path / "out", url, config, sleep=slept.append)
    assert res.status == "failed" and res.attempts == 1  # plain 404s: no retry


def test_local_folder_mirror(mirror, tmp_path):
    root, rows = mirror
    for spec in (str(root), root.as_uri()):
        out = tmp_path / f"out-{len(spec)}"
        report = fetch_manifest(rows, out, spec, FetchConfig(workers=2, retries=0), progress=False)
        assert {r.id for r in report.failed} == {CORRUPTED, MISSING}
        assert len(report.downloaded) == 6
        assert (out / "nonmembers" / "74953.txt").read_bytes() == _book("74953")
        again = fetch_manifest(rows, out, spec, FetchConfig(workers=2, retries=0), progress=False)
        assert len(again.skipped) == 6


def test_no_hash_manifest_and_bad_arguments(mirror, tmp_path):
    root, rows = mirror
    plain = [ManifestRow(r.id, r.label, path=f"{r.id}.txt") for r in rows if r.id in ("2052", CORRUPTED)]
    report = fetch_manifest(plain, tmp_path / "out", str(root), progress=False)
    assert report.ok  # without a hash the corrupted copy cannot be told apart...
    assert len(report.unverified) == 2 and "UNVERIFIED: 2 of the books" in report.summary()  # ...and it says so
    with pytest.raises(DocauditError, match="no such folder"):
        fetch_manifest(plain, tmp_path / "out", str(tmp_path / "nowhere"), progress=False)
    with pytest.raises(DocauditError, match="unsupported scheme"):
        fetch_manifest(plain, tmp_path / "out", "ftp://mirror.example", progress=False)
    with pytest.raises(DocauditError, match="leaves the output folder"):
        fetch_manifest([ManifestRow("1", "member", path="../1.txt")], tmp_path / "out", str(root), progress=False)
    with pytest.raises(DocauditError, match="workers"):
        fetch_manifest(plain, tmp_path / "out", str(root), FetchConfig(workers=0), progress=False)
    for bad in (FetchConfig(timeout=0), FetchConfig(book_timeout=-1), FetchConfig(backoff=-1)):
        with pytest.raises(DocauditError, match="must be"):
            fetch_manifest(plain, tmp_path / "out", str(root), bad, progress=False)


def _plain(rows, *ids):
    """The rows of ``ids`` without sha256 or size, as in the shipped manifest for fetching current copies."""
    return [ManifestRow(r.id, r.label, path=r.path) for r in rows if r.id in ids]


@pytest.mark.parametrize("how", ["trickle", "trickle-head"])
def test_timeout_bounds_a_whole_download(mirror, server, tmp_path, capsys, how):
    """A server that sends one byte per second never lets a read time out; the download is still cut off."""
    _, rows = mirror
    url, handler = server
    handler.misbehave["/cache/epub/2719/pg2719.txt"] = how  # the first layout tried; the others are absent
    rc = within(HANG_GUARD, _run_script, tmp_path, rows[:1], url, "--timeout", 1, "--retries", 0)
    assert rc == 1
    err = capsys.readouterr().err
    assert "FAILED 2719: " in err and "pg2719.txt: timed out (a download may take 1 s)" in err
    assert not (tmp_path / "out" / rows[0].path).exists()


def test_download_cut_short_is_retried(mirror, server, tmp_path, capsys):
    _, rows = mirror
    url, handler = server
    handler.misbehave["/cache/epub/2719/pg2719.txt"] = "cut"  # on the first request only
    rc = within(HANG_GUARD, _run_script, tmp_path, rows[:1], url, "--retries", 1, "--backoff", 0.01)
    assert rc == 0, capsys.readouterr().err
    assert "1 books: 1 downloaded" in capsys.readouterr().out
    assert (tmp_path / "out" / rows[0].path).read_bytes() == _book("2719")
    assert handler.requests.count("/cache/epub/2719/pg2719.txt") == 2


@pytest.mark.parametrize("how", ["html", "html-as-text"])
def test_without_a_hash_an_html_page_is_refused(mirror, server, tmp_path, capsys, how):
    _, rows = mirror
    url, handler = server
    handler.misbehave["/cache/epub/2719/pg2719.txt"] = how
    plain = _plain(rows, "2719", "53516")
    rc = within(HANG_GUARD, _run_script, tmp_path, plain, url, "--retries", 0)
    err = capsys.readouterr().err
    assert rc == 1
    assert "2 books: 1 downloaded, 0 already present, 1 failed" in err
    assert "UNVERIFIED: 1 of the books accepted" in err  # 53516: accepted, but said to be unverified
    reason = "served as text/html" if how == "html" else "an HTML page"
    assert "FAILED 2719: " in err and reason in err
    assert not (tmp_path / "out" / plain[0].path).exists()  # nothing saved for the refused book
    assert (tmp_path / "out" / plain[1].path).read_bytes() == _book("53516")


def test_without_a_hash_the_gutenberg_header_and_size_are_checked(mirror, tmp_path):
    root, rows = mirror
    (root / "cache/epub/2719/pg2719.txt").write_bytes(_book("2052"))  # another book under this id
    tiny = root / "files/53516/53516-0.txt"
    tiny.write_bytes(tiny.read_bytes()[:500])  # a stub
    report = fetch_manifest(
        _plain(rows, "2719", "53516", "74553"), tmp_path / "out", str(root), FetchConfig(retries=0), progress=False
    )
    errors = {r.id: r.error for r in report.failed}
    assert set(errors) == {"2719", "53516"}
    assert "Gutenberg header names ebook #2052, not #2719" in errors["2719"]
    assert "too small (500 bytes" in errors["53516"]
    assert [r.id for r in report.unverified] == ["74553"] and not report.downloaded[0].verified


def test_a_silent_server_costs_at_most_the_book_budget(mirror, server, tmp_path, capsys, caplog):
    _, rows = mirror
    url, handler = server
    for rel in candidate_paths("2719"):  # every layout accepts the connection and never answers
        handler.misbehave[f"/{rel}"] = "silent"
    caplog.set_level(logging.INFO, logger="docaudit.corpus.fetch")
    rc = within(
        HANG_GUARD,
        _run_script,
        tmp_path,
        rows[:1],
        url,
        "--timeout",
        1,
        "--retries",
        3,
        "--backoff",
        0.01,
        "--book-timeout",
        2.5,
    )
    assert rc == 1
    assert "FAILED 2719: gave up after the 2.5 s allowed per book" in capsys.readouterr().err
    assert f"2719: trying {url}/cache/epub/2719/pg2719.txt (round 1 of 4" in caplog.text  # what is being tried
    assert "pg2719.txt: timed out" in caplog.text
    assert FetchConfig().book_timeout <= 300  # with the defaults a book costs minutes at most, not half an hour


def test_a_file_the_fetcher_did_not_write_is_left_alone(mirror, tmp_path):
    root, rows = mirror
    plain = _plain(rows, "2719")
    dest = tmp_path / "out" / plain[0].path
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"my notes on this book\n")
    report = fetch_manifest(plain, tmp_path / "out", str(root), progress=False)
    assert [r.id for r in report.failed] == ["2719"] and "--overwrite" in report.failed[0].error
    assert dest.read_bytes() == b"my notes on this book\n"
    report = fetch_manifest(plain, tmp_path / "out", str(root), FetchConfig(overwrite=True), progress=False)
    assert report.ok and dest.read_bytes() == _book("2719")
    again = fetch_manifest(plain, tmp_path / "out", str(root), progress=False)  # an accepted file is kept
    assert [r.status for r in again.results] == ["skipped"] and [r.id for r in again.unverified] == ["2719"]
