#!/usr/bin/env python
"""Build a docaudit manifest from a book catalog and a cutoff date.

Members: the books of --members-group (default pg19); with --members-group '' the books posted before the cutoff.
Non-members: the books posted on or after the cutoff. Books that fit neither are left out and listed.

Example:
    python scripts/artifacts/build_manifest.py --catalog /path/corpus/catalog.csv --cutoff 2024-09-01 \\
        --out data_manifests/pg19_vs_post2024.csv --no-hashes --overwrite
"""

from __future__ import annotations

import argparse
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "docaudit" / "__init__.py").is_file():  # run from a source checkout: use its package
    sys.path.insert(0, str(_ROOT))

from docaudit.corpus.manifest import (
    build_manifest,
    check_manifest_path,
    verify_files,
    write_manifest,
)
from docaudit.errors import DocauditError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalog", required=True, help="catalog CSV (id, group, pg_posted, ...)")
    ap.add_argument("--cutoff", required=True, help="YYYY-MM-DD: posted on or after this date = non-member")
    ap.add_argument("--members-group", default="pg19", help="catalog group whose books are members ('' = by date)")
    ap.add_argument("--source", default="gutenberg", help="value of the source column (default: gutenberg)")
    ap.add_argument(
        "--no-hashes", action="store_true", help="leave sha256/n_bytes empty (to fetch current copies from a mirror)"
    )
    ap.add_argument("--verify-root", help="check every file's size and sha256 under this corpus root")
    ap.add_argument("--out", required=True, help="manifest CSV to write")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier manifest at --out")
    args = ap.parse_args(argv)
    try:
        check_manifest_path(args.out, args.overwrite)
        rows, excluded = build_manifest(
            args.catalog, args.cutoff, args.members_group or None, args.source, hashes=not args.no_hashes
        )
        if args.verify_root:
            problems = verify_files(rows, args.verify_root)
            if problems:
                for line in problems:
                    print(f"mismatch: {line}", file=sys.stderr)
                raise DocauditError(f"{len(problems)} file(s) under {args.verify_root} do not match the catalog")
        write_manifest(rows, args.out, args.overwrite)
    except DocauditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n_mem = sum(r.label == "member" for r in rows)
    print(
        f"{args.out}: {len(rows)} books ({n_mem} members, {len(rows) - n_mem} non-members)"
        + (f", {len(excluded)} left out" if excluded else "")
        + (", files verified" if args.verify_root else "")
    )
    for rid, reason in excluded.items():
        print(f"  left out {rid}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
