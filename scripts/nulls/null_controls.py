"""Where the truth is known, how often does ``controls`` give p <= 0.05, and how often does it find trained books?

The documented configuration, on tiny models trained from scratch on excerpts of real books (read by path from
the shared corpus). Per repetition (``--targets``, each independent: its own books, seeds and models) a base model
B on its own PG-19 books, and a target T: B trained further on ``--members`` other PG-19 books. The
generator is the target's own base B (as when a base model writes the suffixes for a model trained from it), or
the target itself (``controls`` on the embedded model, where the library calibrates the contrast). Every text is
put through ``audit.synthetic_controls.examine_book`` under each generator; each judged book is ranked at matched
geometry (``inference.matched.matched_rank``, the p-value ``controls`` prints: every text's passages one per
stretch of 64 tokens) among those of ``--library`` texts drawn at random from a pool of never-trained PG-19 texts,
each long enough to hold the book's layout compared through as many consecutive passages; where too few hold it
for a p-value below 0.05 the book is "inconclusive" (``library_too_short``), counted as not found. Each library
text has
``--library-words`` words, or a length drawn between ``--library-words-min`` and that. Groups:

- ``same``: never-trained PG-19 books (the library's era): the same-distribution null;
- ``era``: never-trained post-2024 books against the PG-19 library: the cross-era null;
- ``trained``: the members (power).

Min-K%++ (k = 20%) of each book under T, thresholded at the 95th percentile of that target's never-trained PG-19
books, gives power at the same false-positive rate. The defaults are the documented full size: 8 targets, 35
never-trained books per null group and target, 1,200-word books each ranked among 39 of 60 library texts of
800-1,200 words (16 passages each, in 16 stretches of 64 tokens), 15
members: 280 null books per group and generator, where the one-sided exact binomial
test of "the rate is 10%" at level 0.05 sees a true 5% with power 0.93 (239 books is the least size with power
0.9; from 263 on every size has it). Results are written after every target, so an interrupted run keeps its
finished targets.

    python scripts/nulls/null_controls.py --out /tmp/controls-null.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from docaudit.audit.synthetic_controls import examine_book
from docaudit.config import ControlsConfig, ModelConfig, TargetConfig
from docaudit.corpus.base import Document
from docaudit.inference.matched import matched_rank
from docaudit.io import sha256_text
from docaudit.lab.target import train_target
from docaudit.query.models import load_model
from docaudit.run import RunContext

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
SETTINGS = ControlsConfig(
    passages=16, stretch_tokens=64, context_tokens=16, prefix_tokens=16, suffix_tokens=16, samples=3, block=2
)
GENERATORS = ("base", "self")
GROUPS = ("same", "era", "trained")
ALPHA = 0.05


def excerpt(path: Path, n_words: int) -> str:
    """``n_words`` words from the middle of a book (far from its header and licence)."""
    words = path.read_text(encoding="utf-8").replace("\r\n", "\n").split(" ")
    mid = len(words) // 2
    return " ".join(words[mid : mid + n_words])


def tiny(epochs: int, learning_rate: float = 3e-3) -> TargetConfig:
    return TargetConfig(
        layers=2,
        width=64,
        heads=4,
        positions=64,
        vocab_size=512,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=8,
        doc_tokens=None,
    )


@torch.no_grad()
def minkpp(lm, text: str, share: float = 0.2, max_tokens: int = 252) -> float:
    """Min-K%++ (mean of the lowest ``share`` of (log p(x) − E[log p]) / sd[log p]) over windows of 63 tokens."""
    ids = lm.tokenizer(text, add_special_tokens=False).input_ids[:max_tokens]
    values = []
    for start in range(0, len(ids) - 1, 62):
        window = torch.tensor(ids[start : start + 63])[None]
        logp = torch.log_softmax(lm.model(input_ids=window).logits[0, :-1].double(), -1)
        p = logp.exp()
        mu = (p * logp).sum(-1)
        sd = ((p * (logp - mu[:, None]) ** 2).sum(-1)).sqrt()
        values += ((logp.gather(1, window[0, 1:, None])[:, 0] - mu) / sd).tolist()
    values = sorted(values)
    return float(np.mean(values[: max(1, int(share * len(values)))]))


def examined(doc: Document, models: dict):
    """The text examined (its per-passage contrasts and length), or None when too short for two blocks."""
    b = examine_book(doc, models, SETTINGS, 0)
    return None if b.contrast is None else b


def one_target(k: int, args, texts: dict, old: list[str], new: list[str], work: Path) -> list[dict]:
    """Repetition ``k``: its base and target trained, every text examined under both generators, each judged book
    ranked among ``args.library`` texts of its library pool."""
    rng = np.random.default_rng(1000 + k)
    order = [old[i] for i in rng.permutation(len(old))]
    n, m = args.books, args.members
    base_ids, members = order[: args.base_books], order[args.base_books : args.base_books + m]
    same = order[args.base_books + m : args.base_books + m + n]
    pool = order[args.base_books + m + n : args.base_books + m + n + args.library_pool]
    if len(pool) < args.library_pool:
        sys.exit(f"the corpus holds {len(old)} PG-19 books, fewer than base, members, null books and pool need")
    era = [new[i] for i in rng.permutation(len(new))[:n]]
    book = {i: texts[i]["book"] for i in members + same + era}
    library = {i: texts[i]["library"] for i in pool}
    run, began = RunContext(seed=k, progress=False), time.time()
    base_texts = [texts[i]["library"] for i in base_ids]
    everything = [*base_texts, *book.values(), *library.values()]
    base_dir = train_target(base_texts, everything, work / f"base{k}", tiny(20), context=run)
    target_dir = train_target(
        [book[i] for i in members], everything, work / f"target{k}", tiny(args.epochs, 1e-3), str(base_dir), context=run
    )
    base, target = (load_model(ModelConfig(model=str(d))) for d in (base_dir, target_dir))
    trained = time.time()
    every = [*(("same", i) for i in same), *(("era", i) for i in era), *(("trained", i) for i in members)]
    rows = []
    for generator in GENERATORS:
        models = {"generator": base if generator == "base" else target, "target": target}
        null = [b for i in pool if (b := examined(Document(i, i, library[i], sha256_text(library[i])), models))]
        rows += [
            {"target": k, "generator": generator, "group": "library", "usable": True, "contrast": b.contrast.mean}
            for b in null
        ]
        for group, i in every:
            b = examined(Document(i, i, book[i], sha256_text(book[i])), models)
            row = {"target": k, "generator": generator, "group": group, "id": i, "usable": b is not None}
            if b is not None:
                drawn = [null[j] for j in rng.choice(len(null), args.library, replace=False)]
                rank = matched_rank(b.deltas, [x.deltas for x in drawn], rng)
                gated = rank.p_value is None or rank.smallest_p >= ALPHA
                row.update(
                    p=rank.p_value, passages=len(b.deltas), compared=rank.passages, contrast=b.contrast.mean,
                    eligible=rank.texts, library_too_short=gated, rejected=bool(not gated and rank.p_value <= ALPHA),
                )  # fmt: skip
                if generator == "base":
                    row["minkpp"] = minkpp(target, book[i])
            rows.append(row)
    cut = np.quantile([r["minkpp"] for r in rows if r["group"] == "same" and "minkpp" in r], 0.95)
    for r in rows:
        if "minkpp" in r:
            r["minkpp_above"] = bool(r["minkpp"] > cut)
    print(f"target {k}: trained in {trained - began:.0f} s, examined in {time.time() - trained:.0f} s", file=sys.stderr)
    return rows


def summary(rows: list[dict]) -> dict:
    """Per generator and group: books, the share with p <= 0.05 and not inconclusive (Clopper-Pearson 95% interval, and
    the one-sided binomial p-value of "the rate is 10%" for the null groups), per target, the share made inconclusive by
    ``library_too_short`` with the median count of texts that hold the book's layout, and Min-K%++'s share above its
    cut."""
    from scipy.stats import binomtest

    out = {}
    for generator in GENERATORS:
        for group in GROUPS:
            g = [r for r in rows if r["generator"] == generator and r["group"] == group and r["usable"]]
            library = [r["contrast"] for r in rows if r["generator"] == generator and r["group"] == "library"]
            hits = sum(r["rejected"] for r in g)
            test = binomtest(hits, len(g), 0.10, alternative="less")
            ci = binomtest(hits, len(g)).proportion_ci()
            targets = sorted({r["target"] for r in g})
            out[f"{generator}/{group}"] = {
                "books": len(g),
                "p<=0.05": hits / len(g),
                "library_too_short": float(np.mean([r["library_too_short"] for r in g])),
                "eligible_median": float(np.median([r["eligible"] for r in g])),
                "ci95": [ci.low, ci.high],
                "p_vs_10%": test.pvalue,
                "per_target": [float(np.mean([r["rejected"] for r in g if r["target"] == t])) for t in targets],
                "passages_median": float(np.median([r["passages"] for r in g])),
                "compared_median": float(np.median([r["compared"] or 0 for r in g])),
                "mean_contrast_minus_library": float(np.mean([r["contrast"] for r in g]) - np.mean(library)),
                "minkpp_above": float(np.mean([r["minkpp_above"] for r in g])) if generator == "base" else None,
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=8, help="independent repetitions (base, target, books)")
    parser.add_argument("--first", type=int, default=0, help="the first repetition's number (its seeds)")
    parser.add_argument("--books", type=int, default=35, help="judged never-trained books per null group and target")
    parser.add_argument("--members", type=int, default=15, help="books the target is trained on (judged: power)")
    parser.add_argument("--base-books", type=int, default=15, help="PG-19 books the base model is trained on")
    parser.add_argument(
        "--library", type=int, default=39, help="library texts drawn per book (ranked among: those holding its layout)"
    )
    parser.add_argument("--library-pool", type=int, default=60, help="never-trained PG-19 texts libraries draw on")
    parser.add_argument("--book-words", type=int, default=1200)
    parser.add_argument("--library-words", type=int, default=1200, help="words of each library text (the most)")
    parser.add_argument(
        "--library-words-min", type=int, default=800, help="the fewest: each text's length drawn between the two"
    )
    parser.add_argument("--epochs", type=int, default=8, help="epochs the target is trained further on members")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default=None, help="folder of the trained models (kept; reused when run again)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    old = sorted(p.stem for p in (CORPUS / "members").glob("*.txt"))
    new = sorted(p.stem for p in (CORPUS / "nonmembers").glob("*.txt"))
    texts = {}
    lengths = np.random.default_rng(7).integers(
        args.library_words_min or args.library_words, args.library_words + 1, len(old) + len(new)
    )
    for group, ids in (("members", old), ("nonmembers", new)):
        for i in ids:
            path = CORPUS / group / f"{i}.txt"
            words = int(lengths[len(texts)])
            texts[i] = {"book": excerpt(path, args.book_words), "library": excerpt(path, words)}
    work = Path(args.work or tempfile.mkdtemp(prefix="docaudit-controls-null-"))
    began, rows = time.time(), []
    for k in range(args.first, args.first + args.targets):
        these = one_target(k, args, texts, old, new, work)
        rows += these
        print(json.dumps({"target": k, "seconds": round(time.time() - began), **summary(these)}), flush=True)
        print(f"target {k} done at {time.time() - began:.0f} s", file=sys.stderr)
        result = {"settings": SETTINGS.generation_key(0), "args": vars(args), "all": summary(rows), "rows": rows}
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result["all"], indent=1))


if __name__ == "__main__":
    main()
