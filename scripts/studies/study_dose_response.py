"""Dose-response study: how many exposures and how many queried tokens docaudit needs to detect a document that a
pretrained model was trained on further (docs/study.md).

A pool of post-2024 corpus books (posted after the base model's training data was collected) is split at random
(``lab.experiment.split_members``, seeded) into members and non-members; the members are dealt into groups seen 1,
2, 5 and 10 times in ONE continued pretraining of the base model (scripts/studies/train.py), the non-members never.
Each document is used by its leading ``max(--tokens)`` tokens after docaudit's cleaning, so a query of its leading
T tokens reads only trained text for a member. For every cell (model × exposures × tokens) docaudit's evaluation
(``evaluate_methods``: k-fold meta-classifier, Min-K%++, Min-K%, Loss, zlib, the blind baseline, beyond-blind)
runs on the true labels: the members of that exposure group against all non-members, each document cut to its
leading T tokens; the base model's cells (exposures 0: all members against all non-members) are the control.

Stages (each resumes; a rerun with the same ``--out`` skips what is finished): plan, base (``--tiny``: a tiny
base model pretrained on other books), train, loss, cells, report. ``--tiny`` runs a small version end to end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import platform
import sys
from dataclasses import asdict, dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from studies.common import read_json, timed, write_csv, write_json  # noqa: E402
from studies.train import TrainPlan, continue_pretraining  # noqa: E402

log = logging.getLogger("study")

DEFAULT_CORPUS = pathlib.Path(os.environ.get("DOCAUDIT_CORPUS", "/work/shared/corpus"))


@dataclass(frozen=True)
class Scale:
    """The size of a run (the CPU default, or ``--tiny``)."""

    pool: int
    tokens: tuple[int, ...]
    exposures: tuple[int, ...]
    learning_rate: float
    block: int
    batch_size: int
    folds: int
    checkpoint_every: int


FULL = Scale(88, (128, 256, 512), (1, 2, 5, 10), 5e-5, 512, 2, 5, 10)
TINY = Scale(40, (24, 48, 96), (1, 2, 5, 10), 1e-2, 64, 2, 5, 50)
TINY_BASE = dict(
    layers=2, width=128, heads=4, positions=64, vocab_size=512, epochs=10, learning_rate=3e-3, batch_size=8
)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=pathlib.Path, help="results folder (created; resumed when rerun)")
    ap.add_argument("--tiny", action="store_true", help="a small version with a tiny base model (minutes)")
    ap.add_argument("--corpus", type=pathlib.Path, default=DEFAULT_CORPUS, help="the shared corpus folder")
    ap.add_argument("--base-model", help="local Hugging Face folder (default: the embedded Gemma-3-270M)")
    ap.add_argument("--pool", type=int, help="books in the pool (half become members)")
    ap.add_argument("--tokens", help="comma-separated leading tokens queried per document; the largest is trained")
    ap.add_argument("--exposures", help="comma-separated times the member groups are seen")
    ap.add_argument("--learning-rate", type=float)
    ap.add_argument("--batch-size", type=int, help="training blocks per optimizer step")
    ap.add_argument("--block", type=int, help="training block length in tokens")
    ap.add_argument("--folds", type=int)
    ap.add_argument("--no-base-cells", action="store_true", help="skip the base model's control cells")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", help="float32, or bfloat16 (on a GPU: autocast in training)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    return ap.parse_args(argv)


def scale_of(args) -> Scale:
    base = TINY if args.tiny else FULL
    ints = lambda s: tuple(int(x) for x in s.split(","))  # noqa: E731
    return Scale(
        args.pool or base.pool,
        ints(args.tokens) if args.tokens else base.tokens,
        ints(args.exposures) if args.exposures else base.exposures,
        args.learning_rate or base.learning_rate,
        args.block or base.block,
        args.batch_size or base.batch_size,
        args.folds or base.folds,
        base.checkpoint_every,
    )


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average_at_start": os.getloadavg(),
    }


def plan_stage(args, scale: Scale, out: pathlib.Path) -> dict:
    """Choose the pool (seeded, among the post-2024 books), split it, deal the members into exposure groups."""
    from docaudit.corpus.documents import load_documents
    from docaudit.lab.experiment import split_members

    wanted = {"scale": asdict(scale), "seed": args.seed, "tiny": args.tiny, "corpus": str(args.corpus.resolve())}
    wanted = json.loads(json.dumps(wanted))  # as read back from plan.json (tuples become lists)
    plan = read_json(out / "plan.json")
    if plan is not None:
        if plan["settings"] != wanted:
            raise SystemExit(f"error: {out} holds a study with other settings; use another --out")
        return plan
    files = sorted((args.corpus / "nonmembers").glob("*.txt"))
    if len(files) < scale.pool:
        raise SystemExit(f"error: {args.corpus / 'nonmembers'} holds {len(files)} books, fewer than --pool")
    rng = np.random.default_rng(args.seed)
    chosen = sorted(files[i] for i in rng.choice(len(files), scale.pool, replace=False))
    docs = {d.id: d for d in load_documents([str(p) for p in chosen])}
    split = split_members(list(docs), seed=args.seed)
    members = [i for i in sorted(docs) if split[i]]
    order = [members[i] for i in rng.permutation(len(members))]
    exposures = {i: 0 for i in docs} | {i: scale.exposures[k % len(scale.exposures)] for k, i in enumerate(order)}
    plan = {"settings": wanted, "exposures": exposures, "files": {i: d.path for i, d in docs.items()}}
    write_json(out / "plan.json", plan)
    return plan


def base_stage(args, plan: dict, out: pathlib.Path) -> str:
    """The base model's folder: ``--base-model``, the embedded Gemma's converted folder, or (``--tiny``) a tiny
    GPT-2 pretrained with the lab's ``train_target`` on excerpts of other books (the PG-19 group)."""
    if args.base_model:
        return str(pathlib.Path(args.base_model).resolve())
    if not args.tiny:
        from docaudit.query.models import resolve_source

        return resolve_source(None).location()
    from docaudit.config import TargetConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.lab.target import train_target
    from docaudit.run import RunContext

    other = [
        d.text[len(d.text) // 2 : len(d.text) // 2 + 3000]
        for d in load_documents([str(p) for p in sorted((args.corpus / "members").glob("*.txt"))[:24]])
    ]
    pool = [d.text for d in load_documents(list(plan["files"].values()))]
    config = TargetConfig(**TINY_BASE, doc_tokens=None)
    return str(train_target(other, other + pool, out / "base", config, context=RunContext(seed=args.seed)))


def texts_stage(plan: dict, base: str, tokens: tuple[int, ...], out: pathlib.Path) -> dict:
    """Each document's leading ``max(tokens)`` token ids (trained on, for members) and, per T, the text of its
    leading T tokens, written to ``out/texts/t<T>/<members|nonmembers>/<id>.txt``."""
    from transformers import AutoTokenizer

    from docaudit.corpus.documents import load_documents
    from docaudit.io import atomic_write_text
    from docaudit.lab.target import leading_token_ids

    saved = read_json(out / "texts" / "texts.json")
    if saved is not None:
        return saved
    tokenizer = AutoTokenizer.from_pretrained(base)
    docs = {d.id: d.text for d in load_documents(list(plan["files"].values()))}
    ids = {i: leading_token_ids(tokenizer, t, max(tokens)) for i, t in docs.items()}
    short = [i for i, v in ids.items() if len(v) < max(tokens)]
    if short:
        raise SystemExit(f"error: {len(short)} books hold fewer than {max(tokens)} tokens: {', '.join(short)}")
    texts = {str(t): {i: tokenizer.decode(v[:t], skip_special_tokens=True) for i, v in ids.items()} for t in tokens}
    for t, by_id in texts.items():
        for i, text in by_id.items():
            role = "members" if plan["exposures"][i] else "nonmembers"
            atomic_write_text(out / "texts" / f"t{t}" / role / f"{i}.txt", text)
    saved = {"ids": ids, "texts": texts}
    write_json(out / "texts" / "texts.json", saved)
    return saved


def query_config(lm):
    """docaudit's default query (windows of 128 tokens), shortened to what a tiny model takes."""
    from docaudit.config import QueryConfig
    from docaudit.query.querier import single_pass_context

    return QueryConfig(context=min(QueryConfig().context, single_pass_context(lm)))


def loss_stage(plan, texts, base, trained, tokens, out, model_config) -> None:
    """Per document, the mean loss of its trained text (leading max(tokens) tokens) under the base and trained
    models; per exposure group, the perplexity ratio."""
    from docaudit.query.models import load_model
    from docaudit.query.querier import open_querier
    from studies.cells import doc_losses, loss_change

    if (out / "loss_change.csv").is_file():
        return
    longest = texts["texts"][str(max(tokens))]
    losses = {}
    for name, path in (("base", base), ("trained", trained)):
        lm = load_model(model_config(path))
        losses[name] = doc_losses(open_querier(lm, query_config(lm)), longest)
        del lm
    frame = pd.DataFrame(
        {
            "document": list(longest),
            "exposures": [plan["exposures"][i] for i in longest],
            "base_loss": [losses["base"][i] for i in longest],
            "trained_loss": [losses["trained"][i] for i in longest],
        }
    )
    write_csv(out / "perplexity.csv", frame)
    write_csv(out / "loss_change.csv", loss_change(frame))


def cells_stage(args, scale, plan, texts, models: dict, out, model_config) -> None:
    """Every cell not yet finished: evaluate, then write its rows, scores and summary (cell.json last)."""
    from docaudit.config import BeyondBlindConfig, MetaConfig
    from docaudit.query.models import load_model
    from studies.cells import documents_for, evaluate_cell

    # --tiny: fewer trees and bootstrap resamples than docaudit's defaults, so the small run takes minutes
    small = (MetaConfig(n_estimators=50), BeyondBlindConfig(n_boot=200)) if args.tiny else ()
    for name, path in models.items():
        todo = []
        groups = (0,) if name == "base" else scale.exposures
        for e in groups:
            for t in scale.tokens:
                cell_dir = out / "cells" / f"{name}_e{e}_t{t}"
                if not (cell_dir / "cell.json").is_file():
                    todo.append((e, t, cell_dir))
        if not todo:
            continue
        lm = load_model(model_config(path))
        query = query_config(lm)
        for e, t, cell_dir in todo:
            with timed(out, f"cell {name} e{e} t{t}"):
                by_id = texts["texts"][str(t)]
                chosen = {
                    i: x
                    for i, x in by_id.items()
                    if (plan["exposures"][i] > 0 if e == 0 else plan["exposures"][i] == e)
                }
                rest = {i: x for i, x in by_id.items() if plan["exposures"][i] == 0}
                members = documents_for(out / "texts" / f"t{t}" / "members", chosen)
                nonmembers = documents_for(out / "texts" / f"t{t}" / "nonmembers", rest)
                rows, scores, summary = evaluate_cell(members, nonmembers, lm, query, scale.folds, args.seed, *small)
                keys = {"model": name, "exposures": e, "tokens": t}
                write_csv(cell_dir / "rows.csv", pd.DataFrame([{**keys, **r} for r in rows]))
                write_csv(cell_dir / "scores.csv", scores)
                write_json(cell_dir / "cell.json", {**keys, **summary, "query_context": query.context})
            log.info("cell %s exposures %d tokens %d done", name, e, t)
        del lm


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["DOCAUDIT_CACHE"] = str(out / "cache")  # the study's own TokenStats cache
    if args.threads:
        torch.set_num_threads(args.threads)
    scale = scale_of(args)
    if (out / "machine.json").exists() is False:
        write_json(out / "machine.json", machine())
    from docaudit.config import ModelConfig
    from studies.report import assemble

    def model_config(path):
        return ModelConfig(model=path, device=args.device, dtype=args.dtype)

    with timed(out, "plan"):
        plan = plan_stage(args, scale, out)
    with timed(out, "base"):
        base = base_stage(args, plan, out)
    with timed(out, "texts"):
        texts = texts_stage(plan, base, scale.tokens, out)
    train_plan = TrainPlan(scale.learning_rate, scale.block, scale.batch_size, 0.1, scale.checkpoint_every, args.seed)
    members = {i: v for i, v in texts["ids"].items() if plan["exposures"][i]}
    with timed(out, "train"):
        trained = str(
            continue_pretraining(
                base,
                members,
                {i: plan["exposures"][i] for i in members},
                out / "train",
                train_plan,
                args.device,
                args.dtype,
            )
        )
    with timed(out, "loss"):
        loss_stage(plan, texts, base, trained, scale.tokens, out, model_config)
    models = {"trained": trained} | ({} if args.no_base_cells else {"base": base})
    cells_stage(args, scale, plan, texts, models, out, model_config)
    assemble(out)
    log.info("study complete: %s", out / "study.csv")
    print(json.dumps({"out": str(out), "study": str(out / "study.csv")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
