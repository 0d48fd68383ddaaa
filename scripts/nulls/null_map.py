"""How often does ``map`` flag a never-trained chapter, and what share of its "evidence" verdicts are false, when a
book's chapters differ in level and share the book's? Where the truth is known: chaptered books (a table of
contents, 8 chapters of 120-400 words under their headings) whose per-token log-probabilities are N(-3, 1) plus the
book's level plus the chapter's, cut and mapped by docaudit's own code (``tests/test_localize.py``'s
``chaptered_book`` and ``chapter_map``); chapters 3, 5 and 7 of each judged book trained (shifted) in the
false-discovery cells.

    python scripts/nulls/null_map.py --draws 60

Per cell: the never-trained chapters' share with p <= 0.05 (nominal 5%), the share of books with any false
"evidence", and the mean false discovery proportion (nominal at most 5%) with its standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_localize import chapter_map  # noqa: E402

CELLS = [  # (chapter SD, book SD, shift of the trained chapters, calibration books)
    (0.0, 0.1, 0.0, 40),
    (0.3, 0.1, 0.0, 40),
    (0.3, 0.1, 0.5, 100),
    (0.3, 0.1, 1.0, 100),
    (0.3, 0.5, 0.5, 100),
    (0.3, 0.5, 1.0, 100),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=60, help="calibration draws per cell, 10 judged books each")
    args = parser.parse_args()
    for chapter_sd, book_sd, shift, n_cal in CELLS:
        null_p, found, gated = chapter_map(chapter_sd, args.draws, shift, book_sd, n_calibration=n_cal)
        fdp = found[:, 0] / np.maximum(found[:, 1], 1)
        print(
            json.dumps(
                {
                    "chapter_sd": chapter_sd,
                    "book_sd": book_sd,
                    "shift": shift,
                    "calibration_books": n_cal,
                    "books": len(found),
                    "null_chapters": len(null_p),
                    "null_p_le_0.05": round(float((null_p <= 0.05).mean()), 4),
                    "books_with_false_evidence": round(float((found[:, 0] > 0).mean()), 4),
                    "mean_discoveries": round(float(found[:, 1].mean()), 3),
                    "fdr": round(float(fdp.mean()), 4),
                    "fdr_se": round(float(fdp.std(ddof=1) / np.sqrt(len(fdp))), 4),
                    "text_gate_stopped": gated,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
