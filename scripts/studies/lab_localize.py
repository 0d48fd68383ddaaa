"""The chapter map where the truth is known: a small target trained on a random half of the chapters of some books.

Lab books are built from PG-19 books of the shared corpus: ``--chapters`` runs of words spread over each book (run
``k`` starts ``k / chapters`` of the way in), of lengths drawn from ``--words`` (so power can be read against
chapter length), each under a "CHAPTER N" heading. A target is trained from scratch on a random half of the chapters
of ``--trained`` books and on every chapter of ``--background`` other books (so that it learns the language of the
corpus, not only the judged books); ``--unseen`` other books are never trained. Every book is queried once; each
trained book is mapped against all the unseen books, and each unseen book against the other unseen books (leave one
out: they are exchangeable). Printed
(and written with ``--json``): per-chapter AUC, the share of trained chapters flagged by length, and the share of
never-trained chapters flagged, in trained books and in unseen books, with binomial 95% intervals.

    python scripts/studies/lab_localize.py --json docs/localize/lab.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

from docaudit.audit.localize import MapSpec, book_map, book_pass
from docaudit.config import LocalizeConfig, ModelConfig, QueryConfig, TargetConfig
from docaudit.corpus.base import Document
from docaudit.corpus.cleaning import clean_text
from docaudit.inference.verdicts import EVIDENCE
from docaudit.io import sha256_text
from docaudit.lab.target import train_target
from docaudit.query.models import load_model
from docaudit.query.querier import open_querier, query_documents

CORPUS = Path(os.environ.get("DOCAUDIT_CORPUS") or Path(__file__).resolve().parents[3] / "shared" / "corpus")


def lab_books(n: int, chapters: int, lengths: list[int], rng: np.random.Generator) -> list[dict]:
    """``n`` lab books: per book, ``chapters`` runs of words from the middle of a PG-19 book, lengths drawn from
    ``lengths``, each under its heading."""
    paths = sorted((CORPUS / "members").glob("*.txt"))
    rng.shuffle(paths)
    books = []
    for path in paths:
        words = clean_text(path.read_text(encoding="utf-8")).split()
        sizes = rng.choice(lengths, size=chapters)
        if len(words) < 2 * chapters * max(lengths):
            continue
        parts = []
        for k, size in enumerate(sizes):
            at = k * len(words) // chapters
            parts.append(f"CHAPTER {k + 1}\n\n" + " ".join(words[at : at + size]))
        books.append({"id": path.stem, "chapters": parts, "sizes": sizes.tolist()})
        if len(books) == n:
            break
    return books


def binomial(k: int, n: int) -> dict:
    ci = binomtest(k, n).proportion_ci() if n else None
    return {"flagged": k, "of": n, "rate": k / n if n else None, "ci": [ci.low, ci.high] if ci else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trained", type=int, default=8, help="books with half of their chapters trained")
    ap.add_argument("--background", type=int, default=20, help="books trained whole, neither judged nor calibration")
    ap.add_argument("--unseen", type=int, default=60, help="books never trained (each one's calibration: the others)")
    ap.add_argument("--chapters", type=int, default=6)
    ap.add_argument("--words", default="80,160,320", help="chapter lengths in words, drawn at random")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--method", default="minkpp")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.trained + args.unseen + args.background
    books = lab_books(n, args.chapters, [int(w) for w in args.words.split(",")], rng)
    background, books = books[args.trained + args.unseen :], books[: args.trained + args.unseen]
    trained_books, unseen = books[: args.trained], books[args.trained :]
    members = [chapter for book in background for chapter in book["chapters"]]
    for book in trained_books:
        book["trained"] = sorted(rng.choice(args.chapters, size=args.chapters // 2, replace=False).tolist())
        members += [book["chapters"][k] for k in book["trained"]]
    for book in unseen:
        book["trained"] = []
    texts = ["\n\n".join(b["chapters"]) for b in books]
    target = TargetConfig(
        layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=args.epochs, batch_size=8, doc_tokens=None
    )
    with tempfile.TemporaryDirectory() as tmp:
        pool = texts + ["\n\n".join(b["chapters"]) for b in background]
        model_dir = train_target(members, pool, Path(tmp) / "target", target)
        lm = load_model(ModelConfig(model=str(model_dir), device="cpu"))
        docs = [Document(b["id"], b["id"], t, sha256_text(t)) for b, t in zip(books, texts)]
        querier = open_querier(lm, QueryConfig(context=63), cache=False)
        stats = query_documents(querier, docs, progress=False)
    spec = MapSpec(LocalizeConfig(method=args.method, min_segment_words=20, min_segment_tokens=32), alpha=args.alpha)
    passes = [book_pass(d, s, lm.tokenizer, spec.config) for d, s in zip(docs, stats)]
    null = passes[args.trained :]
    rows = []
    for book, bp in zip(books, passes):
        if len(bp.segments) != args.chapters:
            raise SystemExit(f"book {book['id']}: {len(bp.segments)} segments found, {args.chapters} built")
        for k, row in enumerate(book_map(bp, null, lm.tokenizer, spec)):
            kind = "trained" if k in book["trained"] else "untrained, trained book" if book["trained"] else "unseen"
            rows.append({**row, "book": book["id"], "kind": kind, "words_built": book["sizes"][k]})
    result = summarize(rows, args)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**result, "rows": rows}, indent=1) + "\n", encoding="utf-8")


def summarize(rows: list[dict], args) -> dict:
    """AUCs, flag rates by kind and by chapter length, and the unadjusted p < alpha rate of unseen chapters."""

    def scores(kind):
        return [r["score"] for r in rows if r["kind"] == kind]

    def auc(a, b):
        return float(roc_auc_score([1] * len(a) + [0] * len(b), a + b)) if a and b else None

    judged = [r for r in rows if r["p_value"] is not None]
    by_kind = {
        kind: binomial(
            sum(r["verdict"] == EVIDENCE for r in judged if r["kind"] == kind), sum(r["kind"] == kind for r in judged)
        )
        for kind in ("trained", "untrained, trained book", "unseen")
    }
    by_length = {}
    for words in sorted({r["words_built"] for r in rows}):
        sel = [r for r in judged if r["kind"] == "trained" and r["words_built"] == words]
        by_length[words] = binomial(sum(r["verdict"] == EVIDENCE for r in sel), len(sel))
    unseen = [r for r in judged if r["kind"] == "unseen"]
    return {
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "auc_trained_vs_unseen": auc(scores("trained"), scores("unseen")),
        "auc_trained_vs_untrained_in_trained_books": auc(scores("trained"), scores("untrained, trained book")),
        "auc_untrained_in_trained_books_vs_unseen": auc(scores("untrained, trained book"), scores("unseen")),
        "flagged_after_bh": by_kind,
        "trained_flagged_by_words": by_length,
        "unseen_p_below_alpha": binomial(sum(r["p_value"] < args.alpha for r in unseen), len(unseen)),
        "inconclusive": sum(r["p_value"] is None for r in rows),
    }


if __name__ == "__main__":
    main()
