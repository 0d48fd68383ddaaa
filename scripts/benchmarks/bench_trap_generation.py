#!/usr/bin/env python
"""What ``traps make`` costs and keeps with a generator on real books: candidates sampled, rejected (by check),
seconds per kept trap, and the traps it planted, written after passages of each book's body
(``TrapConfig.context_tokens``) or from the BOS alone (``--context-tokens 0``, the authors' sampling).

Each book is read as ``traps make`` reads it and trapped on its own (``audit.traps.make_traps``: the prose check of
its language, the perplexity range, near duplicates); a book whose candidates run out (``--max-candidates``) is
reported with the rejections so far. Run: ``python scripts/benchmarks/bench_trap_generation.py --json out.json
members/45.txt`` (paths relative to the shared corpus, or absolute; default generator: the embedded Gemma-3-270M).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

CORPUS = Path(os.environ.get("DOCAUDIT_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))


def main(argv=None) -> dict:
    from docaudit.audit.traps import make_traps
    from docaudit.config import SEED, ModelConfig, TrapConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.errors import DocauditError
    from docaudit.query.models import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("books", nargs="+")
    ap.add_argument("--generator", default=None, help="Generator (forms of --model; default the embedded Gemma).")
    ap.add_argument("--tokens", type=int, default=25, help="Trap length in generator tokens.")
    ap.add_argument("--traps-per-doc", type=int, default=2, help="Traps (and as many controls) per book.")
    ap.add_argument("--context-tokens", type=int, default=TrapConfig.context_tokens)
    ap.add_argument("--batch", type=int, default=8, help="Candidates sampled at once.")
    ap.add_argument("--max-candidates", type=int, default=64, help="Candidates per book before giving up.")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    config = TrapConfig(
        tokens=args.tokens,
        per_document=args.traps_per_doc,
        copies=1,
        context_tokens=args.context_tokens,
        batch_size=args.batch,
        max_candidates=args.max_candidates,
    )
    start = time.perf_counter()
    lm = load_model(ModelConfig(model=args.generator))
    lm.model.eval()  # the weights loaded here, so that each book's time is its generation alone
    result = {"generator": lm.identity, "load_s": round(time.perf_counter() - start, 1), "config": vars(args)}
    result["books"] = []
    for book in args.books:
        path = Path(book) if Path(book).is_absolute() else CORPUS / book
        docs = load_documents([path])
        row = {"book": book}
        t = time.perf_counter()
        try:
            plan = make_traps(docs, lm, config, SEED)
            row |= {"candidates": plan.candidates, "rejected": plan.rejected, "kept": 2 * config.per_document}
            entry = plan.registry.documents[0]
            row["traps"] = [{"text": s.text, "perplexity": round(s.perplexity, 1)} for s in entry.traps]
            row["controls"] = [{"text": s.text, "perplexity": round(s.perplexity, 1)} for s in entry.controls]
        except DocauditError as e:  # candidates ran out: the message counts them and their rejections
            found = re.search(r"only (\d+) of \d+ trap sequences after (\d+) candidates \(rejected: (\{.*\})\)", str(e))
            row["error"] = str(e)
            if found:
                row |= {"kept": int(found[1]), "candidates": int(found[2]), "rejected": eval_counts(found[3])}
        row["seconds"] = round(time.perf_counter() - t, 1)
        row["seconds_per_kept"] = round(row["seconds"] / row["kept"], 1) if row.get("kept") else None
        result["books"].append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return result


def eval_counts(text: str) -> dict:
    """``{'name': n, ...}`` as the refusal prints it, read as data."""
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+)", text)}


if __name__ == "__main__":
    main()
