"""A controlled mini experiment for `docaudit evaluate`: a small GPT-2 trained from scratch on a random half of
short book excerpts (``docaudit.lab``), so membership holds by construction and no era or formatting difference
separates the two sets.

    python scripts/controlled_experiment.py --out runs/controlled          # prepare excerpts, train the target
    docaudit evaluate --members runs/controlled/members --nonmembers runs/controlled/nonmembers \\
        --model runs/controlled/target/model --context 63 --folds 4 --out runs/controlled/evaluation

With ``--evaluate`` the script runs that evaluation itself and prints the table.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from docaudit.lab import TargetConfig, split_members, train_target

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def excerpt(path: Path, n_words: int) -> str:
    """``n_words`` words from the middle of a book (far from any header or licence), line breaks kept."""
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    words = text.split(" ")
    mid = len(words) // 2
    return " ".join(words[mid : mid + n_words])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=32, help="excerpts (books), split at random into two halves")
    parser.add_argument("--words", type=int, default=200, help="words per excerpt")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (tiny models run best on one)")
    parser.add_argument("--evaluate", action="store_true", help="also run the side-by-side evaluation")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    paths = sorted((args.corpus / "members").glob("*.txt"))[: args.docs]
    texts = {p.stem: excerpt(p, args.words) for p in paths}
    split = split_members(list(texts), seed=args.seed)
    for label in ("members", "nonmembers"):
        (args.out / label).mkdir(parents=True, exist_ok=True)
    for book, text in texts.items():
        (args.out / ("members" if split[book] else "nonmembers") / f"{book}.txt").write_text(text, encoding="utf-8")
    config = TargetConfig(layers=2, width=64, heads=4, context=64, vocab_size=512, epochs=args.epochs,
                          learning_rate=3e-3, batch_size=8, seed=args.seed)
    started = time.time()
    model = train_target([texts[b] for b in sorted(texts) if split[b]], list(texts.values()), args.out / "target", config)
    print(f"target: {model} ({sum(split.values())} members, {len(split) - sum(split.values())} non-members; "
          f"trained in {time.time() - started:.0f} s)")
    if not args.evaluate:
        return

    from docaudit.config import MetaConfig, ModelConfig, QueryConfig, ScalingConfig
    from docaudit.evaluation import evaluate_methods, write_evaluation
    from docaudit.report import format_auc_pivot, format_methods_table

    result = evaluate_methods([args.out / "members"], [args.out / "nonmembers"], ModelConfig(model=str(model)),
                              QueryConfig(context=config.context - 1), scaling=ScalingConfig(seed=args.seed),
                              meta=MetaConfig(n_estimators=100, bins=50), folds=4, seed=args.seed)
    write_evaluation(result, args.out / "evaluation")
    print(format_methods_table(result.table))
    print(format_auc_pivot(result.table))
    print(f"evaluation wall time {result.info['wall_seconds']} s")


if __name__ == "__main__":
    main()
