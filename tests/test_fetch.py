"""The Project Gutenberg fetcher against a real HTTP server on 127.0.0.1 and against a local-folder mirror."""
from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import pathlib
import threading
import urllib.parse

import pytest

from docaudit.errors import DocauditError
from docaudit.fetch import candidate_paths, candidate_urls, fetch_book, fetch_manifest, tree_dirs
from docaudit.manifest import ManifestRow, write_manifest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("fetch_gutenberg", REPO / "scripts" / "fetch_gutenberg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


from conftest import CORPUS

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
        rows.append(ManifestRow(book_id, "member" if group == "members" else "nonmember",
                                sha256=hashlib.sha256(data).hexdigest(), n_bytes=len(data),
                                path=f"{group}/{book_id}.txt"))
        if rel is not None:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data if book_id != CORRUPTED else data[:1000] + b"X" + data[1001:])
    return root, rows


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]
    flaky: dict[str, int]

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        path = urllib.parse.urlparse(self.path).path
        self.requests.append(path)
        if self.flaky.get(path, 0) > 0:  # answer 503 a few times first
            self.flaky[path] -= 1
            self.send_error(503, "busy")
            return
        super().do_GET()


@pytest.fixture
def server(mirror):
    root, _ = mirror
    handler = type("Handler", (_Handler,), {"requests": [], "flaky": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_layouts():
    assert tree_dirs("12345") == ["1/2/3/4/12345", "1/2/3/4/5/12345"]
    assert tree_dirs("7") == ["0/7", "7/7"]
    assert candidate_paths("123") == [
        "cache/epub/123/pg123.txt", "files/123/123-0.txt", "files/123/123.txt", "ebooks/123.txt.utf-8",
        "1/2/123/123-0.txt", "1/2/123/123.txt", "1/2/3/123/123-0.txt", "1/2/3/123/123.txt",
    ]
    assert candidate_urls("https://mirror.example/pg/", "5")[0] == "https://mirror.example/pg/cache/epub/5/pg5.txt"


def test_fetch_over_http_with_failures_and_resume(mirror, server, tmp_path, capsys):
    root, rows = mirror
    url, handler = server
    manifest = tmp_path / "m.csv"
    write_manifest(rows, manifest)
    out = tmp_path / "out"
    script = _load_script()
    args = ["--manifest", str(manifest), "--out", str(out), "--mirror", url, "--workers", "3", "--retries", "2",
            "--backoff", "0.01", "--no-progress"]
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
    assert not list(out.rglob("*.part"))  # no temporary files left behind
    # the corrupted book was retried (3 rounds); the missing one was not (404 everywhere)
    assert handler.requests.count(f"/cache/epub/{CORRUPTED}/pg{CORRUPTED}.txt") == 3
    assert handler.requests.count(f"/cache/epub/{MISSING}/pg{MISSING}.txt") == 1

    # second run: the verified files are skipped without a request; the failures are tried again
    handler.requests.clear()
    good = root / f"files/{CORRUPTED}/{CORRUPTED}-0.txt"
    good.parent.mkdir(parents=True)
    good.write_bytes(_book(CORRUPTED))  # a good copy appears under another layout
    (out / "members/2052.txt").write_bytes(b"truncated")  # a damaged local file is downloaded again
    report = fetch_manifest(rows, out, url, workers=2, retries=1, backoff=0.01, progress=False)
    status = {r.id: r.status for r in report.results}
    assert [r.id for r in report.results] == [r.id for r in rows]  # manifest order
    assert status == {"2719": "skipped", "53516": "skipped", "2052": "downloaded", "74553": "skipped",
                      "8793": "skipped", "74953": "skipped", CORRUPTED: "downloaded", MISSING: "failed"}
    assert not any("2719" in p or "53516" in p for p in handler.requests)
    assert {r.id: r.source for r in report.downloaded}[CORRUPTED].endswith(f"/files/{CORRUPTED}/{CORRUPTED}-0.txt")
    assert not report.ok and [r.id for r in report.failed] == [MISSING]


def test_transient_errors_are_retried(mirror, server, tmp_path):
    _, rows = mirror
    url, handler = server
    handler.flaky["/cache/epub/2719/pg2719.txt"] = 2  # 503 twice, then the file
    row = rows[0]
    slept = []
    res = fetch_book(row, tmp_path / "out", url, retries=3, backoff=0.5, sleep=slept.append)
    assert res.status == "downloaded" and res.attempts == 3
    assert slept == [0.5, 1.0]  # exponential backoff between rounds
    res = fetch_book(rows[-1], tmp_path / "out", url, retries=3, backoff=0.5, sleep=slept.append)
    assert res.status == "failed" and res.attempts == 1  # plain 404s: no retry


def test_local_folder_mirror(mirror, tmp_path):
    root, rows = mirror
    for spec in (str(root), root.as_uri()):
        out = tmp_path / f"out-{len(spec)}"
        report = fetch_manifest(rows, out, spec, workers=2, retries=0, progress=False)
        assert {r.id for r in report.failed} == {CORRUPTED, MISSING}
        assert len(report.downloaded) == 6
        assert (out / "nonmembers" / "74953.txt").read_bytes() == _book("74953")
        again = fetch_manifest(rows, out, spec, workers=2, retries=0, progress=False)
        assert len(again.skipped) == 6


def test_no_hash_manifest_and_bad_arguments(mirror, tmp_path):
    root, rows = mirror
    plain = [ManifestRow(r.id, r.label, path=f"{r.id}.txt") for r in rows if r.id in ("2052", CORRUPTED)]
    report = fetch_manifest(plain, tmp_path / "out", str(root), progress=False)
    assert report.ok  # without a hash the corrupted copy cannot be told apart
    with pytest.raises(DocauditError, match="no such folder"):
        fetch_manifest(plain, tmp_path / "out", str(tmp_path / "nowhere"), progress=False)
    with pytest.raises(DocauditError, match="unsupported scheme"):
        fetch_manifest(plain, tmp_path / "out", "ftp://mirror.example", progress=False)
    with pytest.raises(DocauditError, match="leaves the output folder"):
        fetch_manifest([ManifestRow("1", "member", path="../1.txt")], tmp_path / "out", str(root), progress=False)
    with pytest.raises(DocauditError, match="workers"):
        fetch_manifest(plain, tmp_path / "out", str(root), workers=0, progress=False)
