#!/usr/bin/env python
"""Download the books of a docaudit manifest from a Project Gutenberg mirror.

Tries the usual mirror layouts for each book, checks sha256 when the manifest has one (otherwise checks what it
can and reports the book as unverified), retries transient failures with exponential backoff within a time limit
per book, skips books already downloaded and accepted (so an interrupted run resumes), never replaces a file that
fails the checks unless --overwrite is given, and exits with status 1 listing the books that could not be fetched.

Example:
    python scripts/artifacts/fetch_gutenberg.py --manifest data_manifests/pg19_vs_post2024.csv --out books/
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "docaudit" / "__init__.py").is_file():  # run from a source checkout: use its package
    sys.path.insert(0, str(_ROOT))

from docaudit.config import FetchConfig
from docaudit.corpus.fetch import fetch_manifest
from docaudit.corpus.manifest import read_manifest
from docaudit.errors import DocauditError

DEFAULT_MIRROR = "https://www.gutenberg.org"


def main(argv=None) -> int:
    d = FetchConfig()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True, help="manifest CSV (see data_manifests/README.md)")
    ap.add_argument("--out", required=True, help="download folder; each book goes to OUT/<path column>")
    ap.add_argument(
        "--mirror",
        default=DEFAULT_MIRROR,
        help=f"mirror root: http(s) URL, local folder or file:// URL (default {DEFAULT_MIRROR})",
    )
    ap.add_argument("--workers", type=int, default=d.workers, help=f"parallel downloads (default {d.workers})")
    ap.add_argument(
        "--retries",
        type=int,
        default=d.retries,
        help=f"extra rounds over the layouts after one with transient failures (default {d.retries})",
    )
    ap.add_argument(
        "--backoff",
        type=float,
        default=d.backoff,
        help=f"seconds before the first extra round, doubled each round (default {d.backoff:g})",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=d.timeout,
        help=f"seconds for one file's whole download (default {d.timeout:g})",
    )
    ap.add_argument(
        "--book-timeout",
        type=float,
        default=d.book_timeout,
        help=f"seconds for everything tried for one book, all layouts and rounds (default {d.book_timeout:g})",
    )
    ap.add_argument(
        "--min-bytes",
        type=int,
        default=d.min_bytes,
        help=f"smallest file accepted when the manifest has no sha256 (default {d.min_bytes})",
    )
    ap.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing files that fail the manifest's checks (by default they are left alone)",
    )
    ap.add_argument("--verbose", "-v", action="store_true", help="log every location tried")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    config = FetchConfig(
        workers=args.workers,
        retries=args.retries,
        backoff=args.backoff,
        timeout=args.timeout,
        book_timeout=args.book_timeout,
        min_bytes=args.min_bytes,
        overwrite=args.overwrite,
    )
    if args.no_progress:
        quiet_bar = contextlib.nullcontext()
    else:
        from tqdm.contrib.logging import logging_redirect_tqdm

        quiet_bar = logging_redirect_tqdm()
    try:
        rows = read_manifest(args.manifest)
        with quiet_bar:
            report = fetch_manifest(rows, args.out, args.mirror, config, progress=not args.no_progress)
    except DocauditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
