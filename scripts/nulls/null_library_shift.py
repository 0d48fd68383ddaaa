#!/usr/bin/env python
"""How often does the blind check of a null library against a book fire, and what does it leave of a false
"evidence" when the library is of another era than the book?

Real texts, no model: every book of the shared corpus is profiled as ``controls`` and ``probe`` profile a text
(``methods.text_profile``: its middle 8,000 words, cleaned as docaudit reads it). Per trial a library of
``--library`` texts and one judged book are drawn without replacement:

- ``same``: book and library from the same group (post-2024 books; PG-19 books): H0 holds, the check's p-value is
  uniform and the gate fires at most at its level;
- ``shift``: the library from the post-2024 books, the book from PG-19's (another era, as when a shipped library of
  recent books meets an old book).

Beside it, the test's own statistic is simulated as the one-book tests' rank would see it: each library text's a
standard normal, the book's shifted by ``--stat-shift`` standard deviations in ``shift`` (0 in ``same``), drawn
independently of the texts, so the rates of p <= 0.05 ("evidence" before the gate) and of p <= 0.05 with the gate
not fired (after it) are what the gate does to an era shift the statistic feels and the texts show.

    python scripts/nulls/null_library_shift.py --trials 5000 --json null-library-shift.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from docaudit.audit.library_check import library_check, profile_of  # noqa: E402
from docaudit.corpus.documents import load_documents  # noqa: E402
from docaudit.inference.conformal import conformal_p  # noqa: E402

CORPUS = Path(os.environ.get("DOCAUDIT_CORPUS", ROOT.parent / "shared" / "corpus"))


def profiles(folder: Path) -> list[list[float]]:
    return [profile_of(d.text) for d in load_documents(sorted(str(p) for p in folder.glob("*.txt")))]


def rates(rows: list[tuple[bool, bool]]) -> dict:
    """The gate's rate, and "evidence" before and after it, with Clopper-Pearson 95% intervals."""
    out = {"trials": len(rows)}
    for name, hits in (
        ("gate", sum(g for g, _ in rows)),
        ("evidence_before", sum(e for _, e in rows)),
        ("evidence_after", sum(e and not g for g, e in rows)),
    ):
        ci = binomtest(hits, len(rows)).proportion_ci()
        out[name] = {"rate": hits / len(rows), "ci95": [ci.low, ci.high]}
    return out


def trial(book, library, shift: float, rng: np.random.Generator) -> tuple[bool, bool]:
    _, differs = library_check(book, library)
    stat = conformal_p(rng.normal(shift), rng.normal(size=len(library)))
    return differs is not None, stat <= 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--library", type=int, default=21, help="library texts (the shipped library holds 21)")
    parser.add_argument("--stat-shift", type=float, default=0.25)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    new, old = profiles(CORPUS / "nonmembers"), profiles(CORPUS / "members")
    rng = np.random.default_rng(0)
    cells = {"same (post-2024)": (new, new, 0.0), "same (PG-19)": (old, old, 0.0), "shift": (old, new, args.stat_shift)}
    out = {"settings": vars(args) | {"json": None}, "texts": {"post-2024": len(new), "PG-19": len(old)}}
    for name, (books, pool, shift) in cells.items():
        rows = []
        for _ in range(args.trials):
            if books is pool:
                drawn = rng.choice(len(pool), args.library + 1, replace=False)
                book, library = pool[drawn[0]], [pool[i] for i in drawn[1:]]
            else:
                book = books[rng.integers(len(books))]
                library = [pool[i] for i in rng.choice(len(pool), args.library, replace=False)]
            rows.append(trial(book, library, shift, rng))
        out[name] = rates(rows)
        print(name, json.dumps(out[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
