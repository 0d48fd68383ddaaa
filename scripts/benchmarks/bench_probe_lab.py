"""The n-gram probe on ground truth: a tiny target trained on a random half of excerpts of real books (the lab's
training), each excerpt probed in this process, the per-book AUC of the probe's statistic beside the loss
detector's on the same books, at the doses (epochs) given.

    python scripts/benchmarks/bench_probe_lab.py /path/to/corpus/members --docs 24 --epochs 30 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from docaudit import api  # noqa: E402
from docaudit.config import DetectorConfig, ModelConfig, ProbeConfig, QueryConfig, TargetConfig  # noqa: E402
from docaudit.lab.experiment import split_members  # noqa: E402
from docaudit.lab.target import train_target  # noqa: E402
from docaudit.run import DetectorSpec, ModelSpec, RunContext  # noqa: E402


def excerpts(folder: Path, n: int, words: int) -> dict[str, str]:
    """``words`` words from the middle of each of the first ``n`` books of ``folder`` (far from headers)."""
    out = {}
    for path in sorted(folder.glob("*.txt"))[:n]:
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n").split(" ")
        mid = len(text) // 2
        out[path.stem] = " ".join(text[mid : mid + words])
    return out


def dose(texts: dict[str, str], epochs: int, folder: Path, probe: ProbeConfig, seed: int) -> dict:
    """Train a target for ``epochs`` on a random half, then the probe's and the loss's per-book AUC."""
    split = split_members(list(texts), seed=seed)
    members = [texts[i] for i in sorted(texts) if split[i] == 1]
    config = TargetConfig(
        layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=epochs, learning_rate=3e-3, batch_size=8
    )
    model = train_target(members, list(texts.values()), folder / f"target-{epochs}", config, context=RunContext())
    files = []
    for name, text in sorted(texts.items()):
        path = folder / "texts" / f"{name}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        files.append(path)
    labels = [split[p.stem] for p in files]
    run = RunContext(seed=seed)
    probed = api.probe(api.ProbeRequest(files, ModelConfig(model=str(model)), None, probe, run=run))
    statistic = [row["statistic"] for row in probed.rows]
    scored = api.score(
        api.ScoreRequest(
            files,
            ModelSpec(ModelConfig(model=str(model))),
            QueryConfig(context=63, stride=62),
            DetectorSpec("loss", DetectorConfig()),
            run=run,
        )
    )
    loss = [row["loss"] for row in scored.rows if "loss" in row]
    return {
        "epochs": epochs,
        "members": sum(labels),
        "nonmembers": len(labels) - sum(labels),
        "probe_auc": float(roc_auc_score(labels, statistic)),
        "loss_auc": float(roc_auc_score(labels, loss)),
        "probe_statistic": dict(zip([p.stem for p in files], statistic)),
        "labels": dict(zip([p.stem for p in files], labels)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a folder of books (.txt)")
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--words", type=int, default=150)
    parser.add_argument("--epochs", type=int, nargs="+", default=[30, 4])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    texts = excerpts(args.corpus, args.docs, args.words)
    probe = ProbeConfig(passages=4, prompt_words=8, continuation_words=12, samples=4, new_tokens=16, min_library=3)
    results = []
    with tempfile.TemporaryDirectory(prefix="docaudit-probe-lab-") as tmp:
        for epochs in args.epochs:
            results.append(dose(texts, epochs, Path(tmp), probe, args.seed))
            r = results[-1]
            print(f"epochs {epochs}: probe AUC {r['probe_auc']:.3f}, loss AUC {r['loss_auc']:.3f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
