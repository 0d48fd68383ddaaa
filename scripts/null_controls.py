"""Where the truth is known, how often does ``controls`` give p < 0.05, and how often does it find trained books?

Tiny models trained from scratch on excerpts of real books (read by path from the shared corpus): a generator G
and a reference R, each on its own PG-19 books; per repetition a target T on a random half of a pool of other
PG-19 books, at a dose (epochs) that differs by repetition. Every pool book and every post-2024 book (never trained
by any model) is put through ``audit.synthetic_controls.examine_book`` once per target. Then per judged book, a
null library of ``--library`` never-trained PG-19 pool books drawn at random from the others gives:

- ``library``: the target's raw contrast against the library's (t prediction interval);
- ``library_ref``: the contrast net of the reference's, against the library's;
- ``reference``: the contrast net of the reference's, t-tested against 0 (no library).

Groups: ``same`` (never-trained PG-19 pool books: the same-distribution null), ``era`` (post-2024 books judged
against a PG-19 library: the cross-era null), ``trained`` (power). Min-K%++ (k = 20%) of each book under T is
thresholded at the 95th percentile of the never-trained PG-19 books, for power at the same false-positive rate.

    python scripts/null_controls.py --out /tmp/controls-null.json
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
from docaudit.inference.controls import library_p_value
from docaudit.io import sha256_text
from docaudit.lab.target import train_target
from docaudit.query.models import load_model
from docaudit.run import RunContext

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SETTINGS = ControlsConfig(passages=8, context_tokens=16, prefix_tokens=16, suffix_tokens=16, samples=4, block=2)


def excerpt(path: Path, n_words: int) -> str:
    """``n_words`` words from the middle of a book (far from its header and licence)."""
    words = path.read_text(encoding="utf-8").replace("\r\n", "\n").split(" ")
    mid = len(words) // 2
    return " ".join(words[mid : mid + n_words])


def tiny(epochs: int) -> TargetConfig:
    return TargetConfig(
        layers=2,
        width=64,
        heads=4,
        positions=64,
        vocab_size=512,
        epochs=epochs,
        learning_rate=3e-3,
        batch_size=8,
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


def book_record(doc, models, group: str) -> dict:
    b = examine_book(doc, models, SETTINGS, 0)
    if b.contrast is None:
        return {"id": doc.id, "group": group, "usable": False}
    return {
        "id": doc.id,
        "group": group,
        "usable": True,
        "raw": b.target_contrast,
        "net": b.contrast.mean,
        "net_p0": b.contrast.t_p_value(),
        "placebo_p": b.placebo.t_p_value(two_sided=True),
        "ref": b.reference_contrast,
        "minkpp": minkpp(models["target"], doc.text),
        "cpu": b.cost["cpu_seconds"],
    }


def p_values(rows: list[dict], library_size: int, rng: np.random.Generator) -> None:
    """Each judged book's p-values against a random library of never-trained PG-19 books other than itself."""
    pool = [r for r in rows if r["group"] == "same" and r["usable"]]
    for r in rows:
        if not r["usable"]:
            continue
        others = [x for x in pool if x is not r]
        lib = [others[i] for i in rng.choice(len(others), library_size, replace=False)]
        r["p_library"] = library_p_value(r["raw"], [x["raw"] for x in lib])
        r["p_library_ref"] = library_p_value(r["net"], [x["net"] for x in lib])
        refs = [x["ref"] for x in lib]
        r["ref_outside"] = not min(refs) <= r["ref"] <= max(refs)


def summary(rows: list[dict]) -> dict:
    """Per group: books, the share with p < 0.05 for each p-value, and Min-K%++ above the never-trained 95th
    percentile of its target (rows of several targets: thresholds per target)."""
    out = {}
    for group in ("same", "era", "trained"):
        g = [r for r in rows if r["group"] == group and r["usable"]]
        out[group] = {"books": len(g)}
        for key in ("p_library", "p_library_ref", "net_p0"):
            out[group][key] = float(np.mean([r[key] < 0.05 for r in g if r[key] is not None]))
        out[group]["minkpp_above"] = float(np.mean([r["minkpp_above"] for r in g]))
        out[group]["placebo_fail_01"] = float(
            np.mean([r["placebo_p"] is not None and r["placebo_p"] < 0.01 for r in g])
        )
        out[group]["ref_outside"] = float(np.mean([r["ref_outside"] for r in g]))
        out[group]["raw_mean"] = float(np.mean([r["raw"] for r in g]))
        out[group]["net_mean"] = float(np.mean([r["net"] for r in g]))
        out[group]["cpu_seconds_mean"] = float(np.mean([r["cpu"] for r in g]))
    return out


def era_shift(rows: list[dict]) -> dict:
    """Per statistic (``raw``, ``net``): the post-2024 books' mean minus the never-trained PG-19 books' under the
    same target, in units of the PG-19 books' standard deviation (averaged over targets, with its Welch 95%
    interval per target), and the Kolmogorov–Smirnov p-value per target."""
    from scipy.stats import ks_2samp, ttest_ind

    out = {}
    for key in ("raw", "net"):
        per_target = []
        for k in sorted({r["target"] for r in rows}):
            same = np.array([r[key] for r in rows if r["target"] == k and r["group"] == "same" and r["usable"]])
            era = np.array([r[key] for r in rows if r["target"] == k and r["group"] == "era" and r["usable"]])
            ci = ttest_ind(era, same, equal_var=False).confidence_interval()
            sd = same.std(ddof=1)
            per_target.append(
                {
                    "target": k,
                    "shift_sd": float((era.mean() - same.mean()) / sd),
                    "ci_low_sd": float(ci.low / sd),
                    "ci_high_sd": float(ci.high / sd),
                    "ks_p": float(ks_2samp(era, same).pvalue),
                }
            )
        out[key] = per_target
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doses", default="3,6,12", help="target epochs, one repetition each")
    parser.add_argument("--words", type=int, default=250)
    parser.add_argument("--library", type=int, default=20)
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default=None, help="folder of the trained models (kept; reused when run again)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    old = sorted((CORPUS / "members").glob("*.txt"))
    new = sorted((CORPUS / "nonmembers").glob("*.txt"))
    order = rng.permutation(len(old))
    texts = {p.stem: excerpt(p, args.words) for p in old + new}
    gen_ids = [old[i].stem for i in order[:20]]
    ref_ids = [old[i].stem for i in order[20:50]]
    pool = [old[i].stem for i in order[50:]]
    era = [p.stem for p in new]
    work = Path(args.work or tempfile.mkdtemp(prefix="docaudit-controls-null-"))
    began = time.time()
    models = {}
    for role, ids in (("generator", gen_ids), ("reference", ref_ids)):
        d = train_target(
            [texts[i] for i in ids], [texts[i] for i in ids], work / role, tiny(20), context=RunContext(seed=1)
        )
        models[role] = load_model(ModelConfig(model=str(d)))
    print(f"generator and reference trained in {time.time() - began:.0f} s", file=sys.stderr)
    rows = []
    for k, dose in enumerate(int(x) for x in args.doses.split(",")):
        split = np.random.default_rng(100 + k).permutation(len(pool))
        trained = [pool[i] for i in split[: len(pool) // 2]]
        untrained = [pool[i] for i in split[len(pool) // 2 :]]
        d = train_target(
            [texts[i] for i in trained],
            [texts[i] for i in pool],
            work / f"target{k}",
            tiny(dose),
            context=RunContext(seed=k),
        )
        models["target"] = load_model(ModelConfig(model=str(d)))
        print(f"target {k} (epochs {dose}) trained at {time.time() - began:.0f} s", file=sys.stderr)
        these = []
        for group, ids in (("same", untrained), ("era", era), ("trained", trained)):
            for i in ids:
                rec = book_record(Document(i, f"{i}.txt", texts[i], sha256_text(texts[i])), models, group)
                these.append({**rec, "target": k, "dose": dose})
        cut = np.quantile([r["minkpp"] for r in these if r["group"] == "same" and r["usable"]], 0.95)
        for r in these:
            if r["usable"]:
                r["minkpp_above"] = bool(r["minkpp"] > cut)
        p_values(these, args.library, np.random.default_rng(200 + k))
        print(json.dumps({"target": k, "dose": dose, **summary(these)}), flush=True)
        rows += these
        print(f"target {k} scored at {time.time() - began:.0f} s", file=sys.stderr)
    result = {"settings": SETTINGS.generation_key(0), "library": args.library, "all": summary(rows)}
    result.update(era_shift=era_shift(rows), rows=rows)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({"all": result["all"], "era_shift": result["era_shift"]}))


if __name__ == "__main__":
    main()
