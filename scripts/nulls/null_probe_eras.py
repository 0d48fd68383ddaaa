"""How often does ``probe`` (n-gram coverage) give p <= 0.05 to a book the model never saw, when the null library
is of the book's era, and when it is of another era?

Per repetition (``--targets``, each independent: its own books, seeds and model) a tiny model is trained from
scratch on excerpts of ``--train`` PG-19 books and as many post-2024 books (read by path from the shared corpus).
Every other text is never seen by it. Each text goes through the probe once (``audit.probes.probe_text``, the
model run in this process); each judged book is then ranked (``audit.probes.judge``, the p-value ``probe``
prints) against a library of ``--library`` never-seen texts of either era. Groups:

- ``same/pg19``, ``same/post2024``: never-seen books against a library of their own era (the calibrated null);
- ``era/pg19``: never-seen PG-19 books against a post-2024 library; ``era/post2024``: the reverse.

The defaults are the full size: 8 targets, 32 books per era and target, so 256 books per group and 512 across
eras: a doubled rate (10% against 5%) is seen with power 0.90 per direction and 0.995 across both (one-sided
binomial test at 0.05, books taken as independent; the books of one target share its library, so the per-target
rates are printed too).

    python scripts/nulls/null_probe_eras.py --out /tmp/probe-eras.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from docaudit.audit.probes import judge, probe_text  # noqa: E402
from docaudit.config import ModelConfig, ProbeConfig, TargetConfig  # noqa: E402
from docaudit.corpus.base import Document  # noqa: E402
from docaudit.io import sha256_text  # noqa: E402
from docaudit.lab.target import train_target  # noqa: E402
from docaudit.query.chat import in_process_writer  # noqa: E402
from docaudit.query.models import load_model  # noqa: E402
from docaudit.run import RunContext  # noqa: E402

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
ERAS = {"pg19": "members", "post2024": "nonmembers"}
GROUPS = ("same/pg19", "same/post2024", "era/pg19", "era/post2024")


def excerpt(path: Path, n_words: int) -> str:
    """``n_words`` words from the middle of a book (far from its header and licence)."""
    words = path.read_text(encoding="utf-8").replace("\r\n", "\n").split()
    mid = len(words) // 2
    return " ".join(words[mid : mid + n_words])


def target_config(epochs: int) -> TargetConfig:
    return TargetConfig(
        layers=2,
        width=128,
        heads=4,
        positions=256,
        vocab_size=4096,
        epochs=epochs,
        learning_rate=3e-3,
        batch_size=8,
        doc_tokens=None,
    )


def one_target(k: int, args, texts: dict, ids: dict, work: Path, probe: ProbeConfig) -> list[dict]:
    """Repetition ``k``: its model trained, every never-seen text probed once, each judged book ranked against a
    library of its own era and one of the other."""
    rng = np.random.default_rng(2000 + k)
    drawn = {}
    for era, pool in ids.items():
        order = [pool[i] for i in rng.permutation(len(pool))]
        t, b = args.train, args.books
        drawn[era] = {"train": order[:t], "books": order[t : t + b], "library": order[t + b : t + b + args.library]}
        if len(drawn[era]["library"]) < args.library:
            sys.exit(f"{era}: {len(pool)} books, fewer than --train + --books + --library")
    train = [texts[i] for era in ids for i in drawn[era]["train"]]
    everything = [texts[i] for era in ids for part in drawn[era].values() for i in part]
    run = RunContext(seed=k, progress=False)
    model_dir = train_target(train, everything, work / f"target{k}", target_config(args.epochs), context=run)
    writer = in_process_writer(load_model(ModelConfig(model=str(model_dir))))
    probed = {}
    for era in ids:
        for i in drawn[era]["books"] + drawn[era]["library"]:
            doc = Document(i, f"{era}/{i}.txt", texts[i], sha256_text(texts[i]))
            probed[i] = probe_text(doc, writer, probe, {}, k)
    rows = []
    for era in ids:
        other = next(e for e in ids if e != era)
        for group, library_era in ((f"same/{era}", era), (f"era/{era}", other)):
            books = [copy.deepcopy(probed[i]) for i in drawn[era]["books"]]
            library = [probed[i] for i in drawn[library_era]["library"]]
            verdicts = judge(books, library, probe, k)
            for b, v in zip(books, verdicts):
                rows.append({"target": k, "group": group, "id": b.id, "statistic": b.statistic, "p": v.p_value})
    for era in ids:
        rows += [
            {"target": k, "group": f"library/{era}", "id": i, "statistic": probed[i].statistic}
            for i in drawn[era]["library"]
        ]
    return rows


def summary(rows: list[dict]) -> dict:
    """Per group: books, the share with p <= 0.05 (Clopper-Pearson 95% interval, and the one-sided binomial
    p-value of "the rate is 10%"), per target, and the groups' mean statistics."""
    from scipy.stats import binomtest

    out = {}
    for group in (*GROUPS, "era/both"):
        g = [r for r in rows if r["group"] == group or (group == "era/both" and r["group"].startswith("era/"))]
        g = [r for r in g if r["p"] is not None]
        if not g:
            continue
        hits = sum(r["p"] <= 0.05 for r in g)
        ci = binomtest(hits, len(g)).proportion_ci()
        targets = sorted({r["target"] for r in g})
        out[group] = {
            "books": len(g),
            "p<=0.05": hits / len(g),
            "ci95": [ci.low, ci.high],
            "p_vs_10%": binomtest(hits, len(g), 0.10, alternative="less").pvalue,
            "per_target": [float(np.mean([r["p"] <= 0.05 for r in g if r["target"] == t])) for t in targets],
        }
    for era in ERAS:
        out[f"mean_statistic/{era}"] = float(
            np.mean([r["statistic"] for r in rows if r["group"] in (f"same/{era}", f"library/{era}")])
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=8, help="independent repetitions (model, books)")
    parser.add_argument("--first", type=int, default=0, help="the first repetition's number (its seeds)")
    parser.add_argument("--books", type=int, default=32, help="judged books per era and target")
    parser.add_argument("--train", type=int, default=20, help="books of each era the model is trained on")
    parser.add_argument("--library", type=int, default=39, help="library texts per era (39: p <= 0.05 is 2 in 40)")
    parser.add_argument("--words", type=int, default=200, help="words per excerpt")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default=None, help="folder of the trained models (kept; reused when run again)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    probe = ProbeConfig(
        passages=args.passages,
        prompt_words=20,
        continuation_words=30,
        samples=args.samples,
        new_tokens=args.new_tokens,
        min_library=args.library,
    )
    ids = {era: sorted(p.stem for p in (CORPUS / folder).glob("*.txt")) for era, folder in ERAS.items()}
    texts = {i: excerpt(CORPUS / ERAS[era] / f"{i}.txt", args.words) for era in ids for i in ids[era]}
    work = Path(args.work or tempfile.mkdtemp(prefix="docaudit-probe-eras-"))
    os.environ.setdefault("DOCAUDIT_CACHE", str(work / "cache"))  # the generations kept apart from the user's
    out = Path(args.out)
    began, rows = time.time(), []
    for k in range(args.first, args.first + args.targets):
        rows += one_target(k, args, texts, ids, work, probe)
        result = {"args": vars(args), "probe": probe.used(0), "all": summary(rows), "rows": rows}
        out.write_text(json.dumps(result, indent=1))
        print(json.dumps({"target": k, "seconds": round(time.time() - began), **summary(rows)}), flush=True)
    print(json.dumps(result["all"], indent=1))


if __name__ == "__main__":
    main()
