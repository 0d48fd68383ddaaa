"""Download the books of a manifest from a Project Gutenberg mirror (HTTP(S), through httpx, or a local folder).

For each book the mirror layouts of :func:`candidate_urls` are tried in order. A file is accepted when it matches
the manifest's ``sha256``; without one it is checked as far as it can be (``n_bytes`` when given, not served or
written as HTML, not binary, a minimum size, the ebook number of its Gutenberg header when it has one) and
reported as unverified. A missing file (HTTP 404/410) sends the fetcher to the next layout; network errors
(timeouts, resets, downloads cut short), server errors and rejected files do too, and when every layout has
failed that way the whole round is retried after an exponential backoff. One file's download, however slowly the
server sends it, is bounded by ``timeout`` and everything spent on one book by ``book_timeout``.

Files are written atomically to ``out_dir / row.path``. A file already there that passes the checks is kept
(skipped, so runs resume); one that fails them is left alone and the book counted as failed, unless ``overwrite``
is set: the fetcher never replaces a file it cannot tell is the manifest's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import httpx

from docaudit import net
from docaudit.config import MAX_DOCUMENT_BYTES, FetchConfig
from docaudit.corpus.manifest import ManifestRow
from docaudit.errors import DocauditError
from docaudit.io import atomic_write
from docaudit.untrusted import read_untrusted

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
    def parse(cls, mirror: str) -> Mirror:
        """A mirror from the user's ``--mirror``: an http(s) URL, a ``file://`` URL or a local folder (which must
        exist)."""
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
        """The URL or local path of ``rel`` (a ``/``-separated path under the mirror root)."""
        return str(pathlib.Path(self.base, *rel.split("/"))) if self.local else f"{self.base}/{rel}"


def candidate_urls(mirror: str | Mirror, book_id: str) -> list[str]:
    """Full URLs (or local paths) tried for a book, in order."""
    m = mirror if isinstance(mirror, Mirror) else Mirror.parse(mirror)
    return [m.location(rel) for rel in candidate_paths(book_id)]


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, httpx.RemoteProtocolError):
        return f"the connection was closed before the download was complete ({text or type(error).__name__})"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def env_proxy(mirror: Mirror) -> str | None:
    """The HTTP(S) proxy the environment names for the mirror (``https_proxy``, ``http_proxy`` ..., as urllib reads
    them), unless ``no_proxy`` covers its host; None for a local mirror."""
    if mirror.local:
        return None
    parsed = urllib.parse.urlparse(mirror.base)
    proxy = urllib.request.getproxies().get(parsed.scheme)
    if not proxy or urllib.request.proxy_bypass(parsed.hostname or ""):
        return None
    if urllib.parse.urlparse(proxy).scheme not in ("http", "https"):
        raise DocauditError(f"the {parsed.scheme} proxy {proxy!r} of the environment is not an HTTP(S) proxy")
    return proxy


def mirror_client(mirror: Mirror, connections: int) -> httpx.Client:
    """A pooled client for the mirror: redirects followed, docaudit's User-Agent, the environment's proxy."""
    headers = {"User-Agent": USER_AGENT}
    return net.client(connections, follow_redirects=True, headers=headers, proxy=env_proxy(mirror))


def _get(mirror: Mirror, location: str, timeout: float, http: httpx.Client | None = None) -> tuple[bytes, str | None]:
    """The file at ``location`` and the content type it was served with; an HTTP download (connection, redirects,
    headers and body) takes at most ``timeout`` seconds (``docaudit.net``'s deadline rule)."""
    if mirror.local:
        p = pathlib.Path(location)
        if not p.is_file():
            raise _NotFound(location)
        try:
            return read_untrusted(p, "document"), None
        except OSError as e:
            raise _Transient(f"{location}: {e}") from None
    own = http is None
    http = http or mirror_client(mirror, 1)
    try:
        answer = net.request(http, "GET", location, timeout, max_bytes=MAX_DOCUMENT_BYTES)
    except net.Timeout:
        raise _Transient(f"{location}: timed out (a download may take {timeout:g} s)") from None
    except net.Unacceptable as e:
        raise _Transient(f"{location}: {e}") from None
    except httpx.HTTPError as e:  # refused or reset connections, a download cut short, a garbled answer
        raise _Transient(f"{location}: {_describe(e)}") from None
    finally:
        if own:
            http.close()
    if answer.status in NOT_FOUND_CODES:
        raise _NotFound(f"{location}: HTTP {answer.status}")
    if answer.status != 200:
        raise _Transient(f"{location}: HTTP {answer.status}")
    return answer.content, answer.content_type


HTML_TYPES = ("text/html", "application/xhtml+xml")


HEAD_BYTES = 16384  # where HTML markers and the Gutenberg header are looked for


# "[EBook #45]", "[eBook #74553]", "*** START OF THE PROJECT GUTENBERG EBOOK 74553 ***"
_EBOOK_NUMBER = re.compile(
    rb"\[e-?book\s*#\s*(\d+)\s*\]|start of (?:the|this) project gutenberg e-?book\s+(\d+)\s*\*\*\*", re.IGNORECASE
)


def _problem(data: bytes, row: ManifestRow, min_bytes: int, content_type: str | None = None) -> str | None:
    """None when ``data`` is acceptable as ``row``'s book, else the reason. A sha256 decides alone; without one,
    what can be checked is."""
    if not data:
        return "empty file"
    if row.sha256:
        got = hashlib.sha256(data).hexdigest()
        return None if got == row.sha256 else f"sha256 mismatch (got {got[:12]}..., want {row.sha256[:12]}...)"
    if row.n_bytes is not None and len(data) != row.n_bytes:
        return f"size mismatch ({len(data)} bytes, want {row.n_bytes})"
    if content_type in HTML_TYPES:
        return f"served as {content_type}, not plain text"
    head = data[:HEAD_BYTES]
    if b"<!doctype html" in head.lower() or b"<html" in head.lower():
        return "an HTML page, not plain text"
    if b"\x00" in head:
        return "binary data, not plain text"
    if len(data) < min_bytes:
        return f"too small ({len(data)} bytes, want at least {min_bytes})"
    numbers = {int(a or b) for a, b in _EBOOK_NUMBER.findall(head)}
    if numbers and row.id.isdigit() and int(row.id) not in numbers:
        named = ", ".join(f"#{n}" for n in sorted(numbers))
        return f"its Gutenberg header names ebook {named}, not #{row.id}"
    return None


def destination(row: ManifestRow, out_dir: str | os.PathLike) -> pathlib.Path:
    """Where a book is saved: ``out_dir/<path or id.txt>``; a manifest path that leaves ``out_dir`` is refused."""
    out = pathlib.Path(out_dir)
    dest = out / (row.path or f"{row.id}.txt")
    if not dest.resolve().is_relative_to(out.resolve()):
        raise DocauditError(f"{row.id}: path {row.path!r} leaves the output folder")
    return dest


@dataclass
class FetchResult:
    """What happened to one book: its status, the file, where it came from, the error and the attempts made."""

    id: str
    status: str  # "downloaded" | "skipped" (already present and accepted) | "failed"
    path: str
    source: str = ""  # the URL or local path the file came from
    error: str = ""
    attempts: int = 0
    verified: bool = False  # the file matches the manifest's sha256 (otherwise it only passed the other checks)


@dataclass
class FetchReport:
    """The results of fetching a manifest, grouped by status for the summary and the exit status."""

    results: list[FetchResult] = field(default_factory=list)

    def _with(self, status: str) -> list[FetchResult]:
        return [r for r in self.results if r.status == status]

    @property
    def downloaded(self) -> list[FetchResult]:
        """Books written by this run."""
        return self._with("downloaded")

    @property
    def skipped(self) -> list[FetchResult]:
        """Books already present and accepted (not downloaded again)."""
        return self._with("skipped")

    @property
    def failed(self) -> list[FetchResult]:
        """Books that could not be fetched, with their errors."""
        return self._with("failed")

    @property
    def unverified(self) -> list[FetchResult]:
        """Books accepted without a sha256 to compare with."""
        return [r for r in self.results if r.status != "failed" and not r.verified]

    @property
    def ok(self) -> bool:
        """True when no book failed."""
        return not self.failed

    def summary(self) -> str:
        """Counts per status, a warning for unverified books, and one line per failure (what the command prints)."""
        lines = [
            f"{len(self.results)} books: {len(self.downloaded)} downloaded, {len(self.skipped)} already present, "
            f"{len(self.failed)} failed"
        ]
        if self.unverified:
            lines.append(
                f"  UNVERIFIED: {len(self.unverified)} of the books accepted (no sha256 in the manifest; "
                "only their size, type and Gutenberg header were checked)"
            )
        lines += [f"  FAILED {r.id}: {r.error}" for r in sorted(self.failed, key=lambda r: r.id)]
        return "\n".join(lines)


def _is_absence(error: str) -> bool:
    return "not found" in error or "HTTP 404" in error or "HTTP 410" in error


def fetch_book(
    row: ManifestRow,
    out_dir: str | os.PathLike,
    mirror: str | Mirror,
    config: FetchConfig = FetchConfig(),
    sleep: Callable[[float], None] = time.sleep,
    http: httpx.Client | None = None,
) -> FetchResult:
    """Fetch one book (see the module docstring), through the pooled client ``http`` when given. Never raises for
    download problems: they end up in the result."""
    m = mirror if isinstance(mirror, Mirror) else Mirror.parse(mirror)
    dest = destination(row, out_dir)
    verified = bool(row.sha256)
    if dest.exists() and not dest.is_file():
        return FetchResult(row.id, "failed", str(dest), error=f"{dest} exists and is not a file")
    if dest.is_file():
        try:
            problem = _problem(read_untrusted(dest, "document"), row, config.min_bytes)
        except OSError as e:
            problem = f"it cannot be read ({e.strerror or e})"
        if problem is None:
            return FetchResult(row.id, "skipped", str(dest), verified=verified)
        if not config.overwrite:
            return FetchResult(
                row.id,
                "failed",
                str(dest),
                error=f"{dest} is already there and was left alone ({problem}); --overwrite replaces it",
            )
        log.info("%s: %s is already there but %s; downloading again (overwrite)", row.id, dest, problem)
    book_deadline = time.monotonic() + config.book_timeout
    rounds = config.retries + 1
    errors: list[str] = []
    attempts = 0
    out_of_time = False
    for attempt in range(rounds):
        attempts = attempt + 1
        retry_worthy = False
        for loc in candidate_urls(m, row.id):
            left = book_deadline - time.monotonic()
            if left <= 0:
                out_of_time = True
                break
            log.info("%s: trying %s (round %d of %d, %.0f s left for this book)", row.id, loc, attempts, rounds, left)
            try:
                data, content_type = _get(m, loc, min(config.timeout, left), http)
            except _NotFound as e:
                errors.append(f"{e}: not found" if m.local else str(e))
                continue
            except _Transient as e:
                log.warning("%s: %s (round %d of %d)", row.id, e, attempts, rounds)
                errors.append(str(e))
                retry_worthy = True
                continue
            problem = _problem(data, row, config.min_bytes, content_type)
            if problem is not None:
                log.warning("%s: %s: rejected: %s (round %d of %d)", row.id, loc, problem, attempts, rounds)
                errors.append(f"{loc}: {problem}")
                retry_worthy = True
                continue
            atomic_write(dest, lambda f, data=data: f.write(data))
            if not verified:
                log.info("%s: downloaded from %s, unverified (no sha256 in the manifest)", row.id, loc)
            return FetchResult(row.id, "downloaded", str(dest), source=loc, attempts=attempts, verified=verified)
        if out_of_time or not retry_worthy:  # out of time, or every layout is simply absent
            break
        if attempt < config.retries:
            pause = config.backoff * (2**attempt)
            if pause >= book_deadline - time.monotonic():
                out_of_time = True
                break
            sleep(pause)
    # report the distinct problems, most informative first (mismatches and errors before plain absences)
    ordered = list(dict.fromkeys(sorted(errors, key=_is_absence)))
    if ordered and all(_is_absence(e) for e in ordered) and not out_of_time:
        error = "not found on the mirror (all layouts tried)"
    else:
        error = "; ".join(ordered[:3])
    if out_of_time:
        error = f"gave up after the {config.book_timeout:g} s allowed per book" + (f": {error}" if error else "")
        log.warning("%s: %s", row.id, error)
    return FetchResult(row.id, "failed", str(dest), error=error, attempts=attempts)


def fetch_manifest(
    rows: list[ManifestRow],
    out_dir: str | os.PathLike,
    mirror: str,
    config: FetchConfig = FetchConfig(),
    progress: bool = True,
) -> FetchReport:
    """Fetch every row with a pool of ``config.workers`` threads; returns the report (``report.ok`` is False if
    any book failed)."""
    if config.workers < 1:
        raise DocauditError(f"workers must be at least 1, got {config.workers}")
    if config.retries < 0:
        raise DocauditError(f"retries must be 0 or more, got {config.retries}")
    if config.backoff < 0:
        raise DocauditError(f"backoff must be 0 or more, got {config.backoff:g}")
    for name in ("timeout", "book_timeout"):
        if not getattr(config, name) > 0:
            raise DocauditError(f"{name} must be more than 0 seconds, got {getattr(config, name):g}")
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
    with mirror_client(m, config.workers) as http, ThreadPoolExecutor(max_workers=config.workers) as pool:
        futures = {pool.submit(fetch_book, row, out_dir, m, config, http=http): row for row in rows}
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
