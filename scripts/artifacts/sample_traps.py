"""Trap candidates from a generator, each with what the checks of ``traps make`` make of it (docs/traps.md).

Samples batches from the generator's BOS exactly as ``query.generate`` does (pure sampling, the temperatures of
``TrapConfig`` in turn) and writes one JSON line per candidate: its batch, temperature, the batch's seconds and
sampled tokens, its fate (``retokenization``, a problem of ``corpus.prose``, or ``kept``: the perplexity range and
near duplicates are not checked here) and its text. Lines are written as they come, so a run stopped early still
shows what it sampled. Run: ``python scripts/artifacts/sample_traps.py --book BOOK.txt --out candidates.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from docaudit.config import ModelConfig, TrapConfig
from docaudit.corpus.prose import ProseCheck, special_strings
from docaudit.query.generate import canonical_prefix, retokenizes
from docaudit.query.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", required=True, help="The book the traps would go into (its language and scripts).")
    parser.add_argument("--out", required=True, help="JSON Lines file to append the candidates to.")
    parser.add_argument("--generator", default=None, help="Generator (forms of --model; default embedded Gemma).")
    parser.add_argument("--tokens", type=int, default=30, help="Trap length in generator tokens.")
    parser.add_argument("--batch", type=int, default=8, help="Candidates per batch.")
    parser.add_argument("--batches", type=int, default=4, help="Batches to sample.")
    args = parser.parse_args()
    with open(args.out, "a", encoding="utf-8") as out:
        t0 = time.time()
        lm = load_model(ModelConfig(model=args.generator))
        print(json.dumps({"load_seconds": time.time() - t0}), file=out, flush=True)
        with open(args.book, encoding="utf-8") as fh:
            check = ProseCheck.of([fh.read()], special_strings(lm.tokenizer))
        tok, temperatures = lm.tokenizer, TrapConfig.temperatures
        extra = args.tokens // 4 + 2
        torch.manual_seed(0)
        for b in range(args.batches):
            temperature = temperatures[b % len(temperatures)]
            start = torch.full((args.batch, 1), tok.bos_token_id, dtype=torch.long)
            t0 = time.time()
            with torch.no_grad():
                sampled = lm.model.generate(
                    start,
                    attention_mask=torch.ones_like(start),
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=args.tokens + extra,
                    min_new_tokens=args.tokens + extra,
                    pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.bos_token_id,
                )[:, 1:]
            seconds = time.time() - t0
            for row in sampled.tolist():
                ids = canonical_prefix(tok, row, args.tokens)
                text = None if ids is None else retokenizes(tok, ids)
                fate = "retokenization" if text is None else (check.problem(text) or "kept")
                line = {
                    "batch": b,
                    "temperature": temperature,
                    "seconds": seconds,
                    "sampled": args.batch * (args.tokens + extra),
                    "fate": fate,
                    "text": text if text is not None else tok.decode(row, skip_special_tokens=False),
                }
                print(json.dumps(line), file=out, flush=True)


if __name__ == "__main__":
    main()
