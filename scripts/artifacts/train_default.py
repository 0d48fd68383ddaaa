"""Build the classifier shipped under models/ for the embedded Gemma-3-270M, from the shared book corpus.

A seeded sample of PG-19 members and post-2024 non-members, one random excerpt of --max-tokens tokens per book.
The card records the model-free blind baseline on the same folds: on these sets it is high (the groups differ in
era and formatting), so this classifier's AUC is not, by itself, evidence of training on the books.

    python scripts/artifacts/train_default.py --corpus ../shared/corpus --out models/gemma3-270m-pg --overwrite
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from docaudit import api
from docaudit.config import DEFAULT_CLASSIFIER, MetaConfig, ModelConfig, QueryConfig, TrainConfig
from docaudit.report.tables import format_summary


def sample(catalog: pd.DataFrame, corpus: Path, group: str, n: int, seed: int) -> list[Path]:
    rows = catalog[catalog.group == group].sample(n=n, random_state=seed)
    return [corpus / f for f in sorted(rows.file)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpus"))
    parser.add_argument("--out", type=Path, default=DEFAULT_CLASSIFIER)
    parser.add_argument("--books", type=int, default=30, help="books per group")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace the classifier already at --out")
    args = parser.parse_args()
    catalog = pd.read_csv(args.corpus / "catalog.csv")
    members = sample(catalog, args.corpus, "pg19", args.books, args.seed)
    nonmembers = sample(catalog, args.corpus, "post2024", args.books, args.seed)
    # the shipped classifier was built on character-normalized text (its card records it, and predict follows it)
    config = TrainConfig(
        model=ModelConfig(),
        query=QueryConfig(max_tokens=args.max_tokens),
        meta=MetaConfig(),
        normalize_chars=True,
    )
    request = api.TrainRequest(
        members, nonmembers, config, args.out, args.overwrite, run=api.RunContext(seed=args.seed)
    )
    result = api.train(request).trained
    print(f"{result.final_config}: {format_summary(result.summary)}")
    if result.card.get("warning"):
        print(f"WARNING: {result.card['warning']}")


if __name__ == "__main__":
    main()
