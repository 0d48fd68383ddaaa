#!/usr/bin/env python
"""Download the books of a docaudit manifest from a Project Gutenberg mirror.

Tries the usual mirror layouts for each book, checks sha256 when the manifest has one, retries with exponential
backoff, skips books already downloaded and verified (so an interrupted run resumes), and exits with status 1
listing the books that could not be fetched.

Example:
    python scripts/fetch_gutenberg.py --manifest data_manifests/pg19_vs_post2024.csv --out books/
"""
from __future__ import annotations

import argparse
import logging
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[1]
if (_ROOT / "docaudit" / "__init__.py").is_file():  # run from a source checkout: use its package
    sys.path.insert(0, str(_ROOT))

from docaudit.errors import DocauditError
from docaudit.fetch import fetch_manifest
from docaudit.manifest import read_manifest

DEFAULT_MIRROR = "https://www.gutenberg.org"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True, help="manifest CSV (see data_manifests/README.md)")
    ap.add_argument("--out", required=True, help="download folder; each book goes to OUT/<path column>")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR,
                    help=f"mirror root: http(s) URL, local folder or file:// URL (default {DEFAULT_MIRROR})")
    ap.add_argument("--workers", type=int, default=4, help="parallel downloads (default 4)")
    ap.add_argument("--retries", type=int, default=3, help="extra rounds after a failed one (default 3)")
    ap.add_argument("--backoff", type=float, default=2.0, help="first backoff in seconds, doubled each round")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        rows = read_manifest(args.manifest)
        report = fetch_manifest(rows, args.out, args.mirror, workers=args.workers, retries=args.retries,
                                backoff=args.backoff, timeout=args.timeout, progress=not args.no_progress)
    except DocauditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
