"""Check predict's verdicts where the truth is known (docs/methods.md, "Per-book p-values: checked where the truth
is known").

1. Random split (no shift): a small GPT-2 lab target is trained on a random half of excerpts of PG-19 books. Over
   repeated random splits, a classifier is trained on some known members and non-members of the target and
   ``predict`` judges the held-out ones: the share of held-out non-members called "evidence of membership" is the
   false-positive rate (at most alpha, up to binomial noise), the share of held-out members is the power; both
   against the tokens queried per excerpt.
2. Shift, never trained: a target trained on other texts; PG-19 excerpts as "members", post-2024 excerpts as
   "non-members"; held-out PG-19 excerpts must come out "inconclusive" or "no evidence", never "evidence".

    python scripts/checks/check_verdicts.py --corpus ../shared/corpus --splits 3 --tokens 32,128 --excerpts 160 \
        --words 150 --width 128 --epochs 40      # docs/methods.md's table: about 6 minutes on two busy cores
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from docaudit import api
from docaudit.config import MetaConfig, ModelConfig, QueryConfig, TargetConfig, TrainConfig
from docaudit.inference.verdicts import EVIDENCE
from docaudit.lab.target import train_target

TARGET = TargetConfig(
    layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=30, learning_rate=3e-3, batch_size=8
)


def excerpts(corpus: Path, group: str, n: int, n_words: int, skip: int = 0) -> list[str]:
    """``n_words`` words from the middle of each of ``n`` books of ``group`` (after the first ``skip``)."""
    out = []
    for path in sorted((corpus / group).glob("*.txt"))[skip : skip + n]:
        words = path.read_text(encoding="utf-8").split()
        mid = len(words) // 2
        out.append(" ".join(words[mid : mid + n_words]))
    return out


def write(texts: list[str], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(texts):
        (path := directory / f"{i:04d}.txt").write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def judge(model_dir, members, nonmembers, held_members, held_nonmembers, tmp: Path, max_tokens, seed, trees):
    """Train a classifier on the known sets and return the verdicts of the held-out ones (lists of row dicts)."""
    config = TrainConfig(
        model=ModelConfig(model=str(model_dir)),
        query=QueryConfig(context=TARGET.positions - 1, max_tokens=max_tokens),
        meta=MetaConfig(norm="max_tf", features="hist", bins=20, folds=5, n_estimators=trees),
    )
    out = tmp / f"classifier-{seed}-{max_tokens}"
    members_dir, nonmembers_dir = write(members, tmp / f"m{seed}"), write(nonmembers, tmp / f"n{seed}")
    api.train(api.TrainRequest(members_dir, nonmembers_dir, config, out, run=api.RunContext(seed=seed)))
    paths = write(held_members + held_nonmembers, tmp / f"h{seed}-{max_tokens}")
    rows = api.predict(api.PredictRequest(paths, out)).rows
    for row, p in zip(rows, cross_conformal_before(out, paths, model_dir)):
        row["p_value_cross_x2"] = p
    return rows[: len(held_members)], rows[len(held_members) :]


def cross_conformal_before(out: Path, paths, model_dir) -> list[float]:
    """The p-value ``predict`` printed before full conformal: cross-conformal from the saved fold models, doubled."""
    from docaudit.corpus.documents import load_documents
    from docaudit.inference.conformal import cross_conformal_p
    from docaudit.methods.meta.classifier import as_documents
    from docaudit.methods.meta.folds import load_folds
    from docaudit.query.models import load_model
    from docaudit.query.querier import open_querier, query_documents

    card = json.loads((out / "card.json").read_text())
    section = card["conformal"]
    metas, _ = load_folds(out, section["blind_kind"], len(section["nonmember_scores"]))
    docs = load_documents(paths, raw=card["raw"], normalize_chars=card["normalize_chars"])
    lm = load_model(ModelConfig(model=str(model_dir)))
    X = as_documents(query_documents(open_querier(lm, QueryConfig(**card["query"])), docs))
    scores = [m.predict_proba(X)[:, 1] for m in metas]
    return cross_conformal_p(scores, section["nonmember_scores"], factor=2).tolist()


def random_split(corpus: Path, splits: int, tokens: list[int], n: int, n_words: int, trees: int, tmp: Path) -> dict:
    texts = excerpts(corpus, "members", n, n_words)
    rng = np.random.default_rng(0)
    trained = rng.permutation(n) < n // 2
    model_dir = train_target([t for t, m in zip(texts, trained) if m], texts, tmp / "target", TARGET)
    members = [t for t, m in zip(texts, trained) if m]
    nonmembers = [t for t, m in zip(texts, trained) if not m]
    result = {"excerpts": n, "words": n_words, "splits": splits, "by_tokens": {}}
    for max_tokens in tokens:
        counts = {
            "nonmember_evidence": 0,
            "nonmember_p_below": 0,
            "nonmembers": 0,
            "member_evidence": 0,
            "member_p_below": 0,
            "nonmember_p_cross_x2_below": 0,
            "member_p_cross_x2_below": 0,
            "members": 0,
        }
        for s in range(splits):
            r = np.random.default_rng([s, 1])
            mi, ni = r.permutation(len(members)), r.permutation(len(nonmembers))
            k_m, k_n = (len(members) * 2) // 3, (len(nonmembers) * 2) // 3
            held_m, held_n = judge(
                model_dir,
                [members[i] for i in mi[:k_m]],
                [nonmembers[i] for i in ni[:k_n]],
                [members[i] for i in mi[k_m:]],
                [nonmembers[i] for i in ni[k_n:]],
                tmp,
                max_tokens,
                s,
                trees,
            )
            for rows, who in ((held_n, "nonmember"), (held_m, "member")):
                for row in rows:
                    key = f"example_{who}_{row['verdict'].replace(' ', '_')}"
                    result.setdefault(
                        key,
                        {"max_tokens": max_tokens, "books_judged": len(held_n) + len(held_m)}
                        | {
                            k: row[k]
                            for k in (
                                "verdict",
                                "reason",
                                "p_value",
                                "q_value",
                                "p_value_blind",
                                "membership_score",
                                "n_known_nonmembers",
                                "smallest_p",
                            )
                        },
                    )
                counts[f"{who}_evidence"] += sum(row["verdict"] == EVIDENCE for row in rows)
                counts[f"{who}_p_below"] += sum(row["p_value"] is not None and row["p_value"] < 0.05 for row in rows)
                counts[f"{who}_p_cross_x2_below"] += sum(row["p_value_cross_x2"] < 0.05 for row in rows)
                counts[f"{who}s"] += len(rows)
        result["by_tokens"][max_tokens] = counts
        print(max_tokens, json.dumps(counts), flush=True)
    return result


def shifted(corpus: Path, n: int, n_words: int, trees: int, tmp: Path) -> dict:
    old = excerpts(corpus, "members", n, n_words, skip=200)
    new = excerpts(corpus, "nonmembers", n, n_words, skip=100)
    other = excerpts(corpus, "nonmembers", 20, n_words)  # the target is trained on other texts only
    model_dir = train_target(other, other + old + new, tmp / "shift-target", TARGET)
    k = (2 * n) // 3
    held_old, _ = judge(model_dir, old[:k], new[:k], old[k:], [], tmp, 64, 0, trees)
    verdicts = [row["verdict"] for row in held_old]
    print("shifted", {v: verdicts.count(v) for v in set(verdicts)}, flush=True)
    return {"held_out_pg19": len(verdicts), "verdicts": {v: verdicts.count(v) for v in set(verdicts)}}


def main() -> None:
    global TARGET
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2].parent / "shared" / "corpus")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--tokens", default="32,64,128")
    parser.add_argument("--excerpts", type=int, default=120)
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="write the counts here as JSON")
    parser.add_argument("--width", type=int, default=TARGET.width, help="the lab target's width")
    parser.add_argument("--epochs", type=int, default=TARGET.epochs, help="the lab target's epochs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one is fastest for this tiny target)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    TARGET = dataclasses.replace(TARGET, width=args.width, epochs=args.epochs)
    with tempfile.TemporaryDirectory(prefix="docaudit-check-verdicts-") as tmp:
        tmp = Path(tmp)
        result = {
            "random_split": random_split(
                args.corpus,
                args.splits,
                [int(t) for t in args.tokens.split(",")],
                args.excerpts,
                args.words,
                args.trees,
                tmp,
            ),
            "shifted": shifted(args.corpus, 45, args.words, args.trees, tmp),
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
