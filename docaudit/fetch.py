"""Download the books of a manifest from a Project Gutenberg mirror (HTTP(S) or a local folder), standard library
only.

For each book the mirror layouts of :func:`candidate_urls` are tried in order; a file is accepted when it is
non-empty and matches the manifest's ``sha256`` (or ``n_bytes``) when given. A missing file (HTTP 404/410) sends
the fetcher to the next layout; network errors, server errors, empty bodies and hash mismatches do too, and when
every layout has failed that way the whole round is retried after an exponential backoff. Files are written
atomically (temporary file + ``os.replace``) to ``out_dir / row.path``; files already there and verified are
skipped, so runs resume.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from .errors import DocauditError
from .manifest import ManifestRow

log = logging.getLogger(__name__)

USER_AGENT = "docaudit-fetch/0.1 (+https://github.com/docaudit)"
NOT_FOUND_CODES = (404, 410)


class _NotFound(Exception):
    pass


class _Transient(Exception):
    pass


def tree_dirs(book_id: str) -> list[str]:
    """Directory-tree locations of a book: PG's mirrors use one folder per digit except the last
    (``12345 -> 1/2/3/4/12345``, ``7 -> 0/7``); the variant with a folder for every digit is tried as well."""
    digits = list(book_id)
    pg = "/".join((digits[:-1] or ["0"]) + [book_id])
    every = "/".join(digits + [book_id])
    return [pg] if every == pg else [pg, every]


def candidate_paths(book_id: str) -> list[str]:
    """Mirror-relative locations of a book's plain text, in the order they are tried."""
    paths = [
        f"cache/epub/{book_id}/pg{book_id}.txt",
        f"files/{book_id}/{book_id}-0.txt",
        f"files/{book_id}/{book_id}.txt",
        f"ebooks/{book_id}.txt.utf-8",
    ]
    for d in tree_dirs(book_id):
        paths += [f"{d}/{book_id}-0.txt", f"{d}/{book_id}.txt"]
    return paths


@dataclass(frozen=True)
class Mirror:
    """A mirror root: ``base`` is an http(s) URL (no trailing slash) or a local folder."""

    base: str
    local: bool

    @classmethod
    def parse(cls, mirror: str) -> "Mirror":
        if not mirror:
            raise DocauditError("no mirror given")
        parsed = urllib.parse.urlparse(mirror)
        if parsed.scheme in ("http", "https"):
            return cls(mirror.rstrip("/"), local=False)
        if parsed.scheme == "file":
            path = urllib.request.url2pathname(parsed.path)
        elif parsed.scheme and len(parsed.scheme) > 1:
            raise DocauditError(f"mirror {mirror!r}: unsupported scheme {parsed.scheme!r} (http, https, file)")
        else:
            path = mirror
        if not pathlib.Path(path).is_dir():
            raise DocauditError(f"mirror {mirror!r}: no such folder")
        return cls(str(pathlib.Path(path)), local=True)

    def location(self, rel: str) -> str:
        return str(pathlib.Path(self.base, *rel.split("/"))) if self.local else f"{self.base}/{rel}"


def candidate_urls(mirror: str | Mirror, book_id: str) -> list[str]:
    """Full URLs (or local paths) tried for a book, in order."""
    m = mirror if isinstance(mirror, Mirror) else Mirror.parse(mirror)
    return [m.location(rel) for rel in candidate_paths(book_id)]


def _get(mirror: Mirror, location: str, timeout: float) -> bytes:
    if mirror.local:
        p = pathlib.Path(location)
        if not p.is_file():
            raise _NotFound(location)
        try:
            return p.read_bytes()
        except OSError as e:
            raise _Transient(f"{location}: {e}") from None
    req = urllib.request.Request(location, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        if e.code in NOT_FOUND_CODES:
            raise _NotFound(f"{location}: HTTP {e.code}") from None
        raise _Transient(f"{location}: HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", e)
        raise _Transient(f"{location}: {reason}") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verified(data: bytes, row: ManifestRow) -> str | None:
    """None when ``data`` is acceptable for ``row``, else the reason."""
    if not data:
        return "empty file"
    if row.sha256:
        got = _sha256(data)
        return None if got == row.sha256 else f"sha256 mismatch (got {got[:12]}..., want {row.sha256[:12]}...)"
    if row.n_bytes is not None and len(data) != row.n_bytes:
        return f"size mismatch ({len(data)} bytes, want {row.n_bytes})"
    return None


def destination(row: ManifestRow, out_dir) -> pathlib.Path:
    out = pathlib.Path(out_dir)
    dest = out / (row.path or f"{row.id}.txt")
    if not dest.resolve().is_relative_to(out.resolve()):
        raise DocauditError(f"{row.id}: path {row.path!r} leaves the output folder")
    return dest


def _write_atomic(dest: pathlib.Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class FetchResult:
    id: str
    status: str  # "downloaded" | "skipped" (already present and verified) | "failed"
    path: str
    source: str = ""  # the URL or local path the file came from
    error: str = ""
    attempts: int = 0


@dataclass
class FetchReport:
    results: list[FetchResult] = field(default_factory=list)

    def _with(self, status: str) -> list[FetchResult]:
        return [r for r in self.results if r.status == status]

    @property
    def downloaded(self) -> list[FetchResult]:
        return self._with("downloaded")

    @property
    def skipped(self) -> list[FetchResult]:
        return self._with("skipped")

    @property
    def failed(self) -> list[FetchResult]:
        return self._with("failed")

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        lines = [
            f"{len(self.results)} books: {len(self.downloaded)} downloaded, {len(self.skipped)} already present, "
            f"{len(self.failed)} failed"
        ]
        lines += [f"  FAILED {r.id}: {r.error}" for r in sorted(self.failed, key=lambda r: r.id)]
        return "\n".join(lines)


def fetch_book(
    row: ManifestRow, out_dir, mirror: str | Mirror, retries: int = 3, backoff: float = 1.0, timeout: float = 60.0,
    sleep=time.sleep,
) -> FetchResult:
    """Fetch one book (see the module docstring). Never raises for download problems: they end up in the result."""
    m = mirror if isinstance(mirror, Mirror) else Mirror.parse(mirror)
    dest = destination(row, out_dir)
    if dest.is_file():
        problem = _verified(dest.read_bytes(), row)
        if problem is None:
            return FetchResult(row.id, "skipped", str(dest))
        log.info("%s: present but %s; downloading again", row.id, problem)
    errors: list[str] = []
    attempts = 0
    for attempt in range(retries + 1):
        attempts = attempt + 1
        retry_worthy = False
        for loc in candidate_urls(m, row.id):
            try:
                data = _get(m, loc, timeout)
            except _NotFound as e:
                errors.append(f"{e}: not found" if m.local else str(e))
                continue
            except _Transient as e:
                errors.append(str(e))
                retry_worthy = True
                continue
            problem = _verified(data, row)
            if problem is not None:
                errors.append(f"{loc}: {problem}")
                retry_worthy = True
                continue
            _write_atomic(dest, data)
            return FetchResult(row.id, "downloaded", str(dest), source=loc, attempts=attempts)
        if not retry_worthy:  # every layout is simply absent: retrying will not help
            break
        if attempt < retries:
            sleep(backoff * (2**attempt))
    # report the distinct problems, most informative first (mismatches and errors before plain absences)
    seen, ordered = set(), []
    for e in sorted(errors, key=lambda e: ("not found" in e or "HTTP 404" in e or "HTTP 410" in e)):
        if e not in seen:
            seen.add(e)
            ordered.append(e)
    found_nowhere = all("not found" in e or "HTTP 404" in e or "HTTP 410" in e for e in ordered)
    error = "not found on the mirror (all layouts tried)" if found_nowhere else "; ".join(ordered[:3])
    return FetchResult(row.id, "failed", str(dest), error=error, attempts=attempts)


def fetch_manifest(
    rows: list[ManifestRow], out_dir, mirror: str, workers: int = 4, retries: int = 3, backoff: float = 1.0,
    timeout: float = 60.0, progress: bool = True,
) -> FetchReport:
    """Fetch every row with a pool of ``workers`` threads; returns the report (``report.ok`` is False if any
    book failed)."""
    if workers < 1:
        raise DocauditError(f"workers must be at least 1, got {workers}")
    if retries < 0:
        raise DocauditError(f"retries must be 0 or more, got {retries}")
    m = Mirror.parse(mirror)
    for row in rows:  # path problems are the user's, reported before any download starts
        destination(row, out_dir)
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    report = FetchReport()
    lock = threading.Lock()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(rows), desc="fetching books", unit="book")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(fetch_book, row, out_dir, m, retries, backoff, timeout): row for row in rows}
        for fut in as_completed(futures):
            row = futures[fut]
            try:
                res = fut.result()
            except Exception as e:  # a bug or a disk error: report it with the book, keep the others going
                res = FetchResult(row.id, "failed", str(destination(row, out_dir)), error=f"{type(e).__name__}: {e}")
            with lock:
                report.results.append(res)
                if bar is not None:
                    bar.update(1)
                    if res.status == "failed":
                        bar.set_postfix(failed=len(report.failed))
    if bar is not None:
        bar.close()
    order = {row.id: i for i, row in enumerate(rows)}
    report.results.sort(key=lambda r: order[r.id])
    return report
