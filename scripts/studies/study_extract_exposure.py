#!/usr/bin/env python
"""What ``extract`` sees, measured: the extractable share of texts a tiny model saw more or fewer times in
training, against texts it never saw.

Real book excerpts (the shared corpus' members, ``--words`` words from the middle of each) are split at random
into five groups of ``--per-group``: never trained on, and in the training set 1, 4, 16 or 64 times, for
``--epochs`` epochs (exposures: copies times epochs; the lab's trainer, ``docaudit.lab.target.train_target``, on
a GPT-2 of the given width). Every text then goes through ``extract``'s examples (50-token prefix, 50-token
suffix, stride 10) and its shares at the default (n, p) = (1, 0.001) and greedy are reported per group, for
each of ``--seeds`` trainings.

    python scripts/studies/study_extract_exposure.py --seeds 2 --json study-extract.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from docaudit.audit.extraction import extract_audit  # noqa: E402
from docaudit.config import ExtractConfig, ModelConfig, TargetConfig  # noqa: E402
from docaudit.corpus.base import Document  # noqa: E402
from docaudit.lab.target import train_target  # noqa: E402
from docaudit.query.models import load_model  # noqa: E402
from docaudit.run import RunContext  # noqa: E402

COPIES = (0, 1, 4, 16, 64)  # times a text is in the training set; each epoch sees every copy once


def excerpts(n: int, words: int) -> list[str]:
    corpus = Path(os.environ.get("DOCAUDIT_CORPUS", ROOT.parent / "shared" / "corpus")) / "members"
    out = []
    for path in sorted(corpus.glob("*.txt"))[:n]:
        tokens = path.read_text(encoding="utf-8").split()
        mid = len(tokens) // 2
        out.append(" ".join(tokens[mid : mid + words]))
    return out


def one_seed(texts: list[str], per_group: int, seed: int, args) -> dict:
    order = np.random.default_rng(seed).permutation(len(texts))
    groups = {
        c * args.epochs: [texts[i] for i in order[g * per_group : (g + 1) * per_group]] for g, c in enumerate(COPIES)
    }
    members = [t for e, group in groups.items() for t in group for _ in range(e // args.epochs)]
    config = TargetConfig(
        layers=2, width=args.width, heads=4, positions=128, vocab_size=1024, epochs=args.epochs, batch_size=args.batch
    )
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        model_dir = train_target(members, texts, tmp, config, context=RunContext(seed=seed, progress=False))
        trained = time.monotonic() - began
        lm = load_model(ModelConfig(model=str(model_dir), device="cpu"))
        docs = {
            e: [Document(f"{e}-{i}", f"{e}-{i}.txt", t, str(i)) for i, t in enumerate(group)]
            for e, group in groups.items()
        }
        found = extract_audit([d for group in docs.values() for d in group], [], lm, ExtractConfig())
    summary = {}
    for e in groups:
        rows = [t.summary for t in found["books"] if t.document.id.startswith(f"{e}-")]
        summary[e] = {
            "extractable_share": float(np.mean([r["extractable_share"] for r in rows])),
            "greedy_share": float(np.mean([r["greedy_share"] for r in rows])),
            "texts_with_any": int(sum(r["discoverable_examples"] > 0 for r in rows)),
            "texts": len(rows),
        }
    return {"seed": seed, "train_seconds": trained, "groups": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-group", type=int, default=6)
    parser.add_argument("--words", type=int, default=250)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="training batch (blocks of 128 tokens)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    texts = excerpts(args.per_group * len(COPIES), args.words)
    results = [one_seed(texts, args.per_group, seed, args) for seed in range(args.seeds)]
    print(f"{'exposures':>9}  " + "  ".join(f"seed {r['seed']}: share / greedy / texts with any" for r in results))
    for e in results[0]["groups"]:
        cells = [r["groups"][e] for r in results]
        print(
            f"{e:>9}  "
            + "  ".join(
                f"{c['extractable_share']:7.1%} / {c['greedy_share']:6.1%} / {c['texts_with_any']} of {c['texts']}"
                for c in cells
            )
        )
    out = {"settings": vars(args) | {"json": None}, "load_average": os.getloadavg(), "results": results}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
