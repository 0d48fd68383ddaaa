"""Sequence-level evaluation, as the benchmarks' papers report it (WikiMIA, MIMIR, BookMIA, PAC): every text
(a benchmark row) scored whole by every selected detector, each in one query pass, then AUC and TPR at 10% / 5%
/ 1% FPR with stratified bootstrap intervals, overall and per WikiMIA length bucket, and the Min-K% / Min-K%++
share ``k`` swept from 0.1 to 1.0.

Each text is queried once, in one window of up to ``SequenceConfig.max_context`` tokens (the single-pass
context of :func:`docaudit.query.querier.single_pass_context`; a longer text is scored over several windows); its
TokenStats are cached, and the k sweep recomputes only the score from them, so a sweep value equals a run with
that single ``k``. The blind baseline (no model: word n-grams and dates of the texts, fit on stratified chunks)
is evaluated on the same texts beside the detectors, and a warning is raised when it separates the sets: a
benchmark whose members and non-members differ in time or topic rewards any detector that sees the difference.
The per-sample scores keep each input's id, label and group, so that they can be joined with
other tools' outputs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from docaudit import __version__
from docaudit.audit.costs import measured_run
from docaudit.config import DetectorConfig, QueryConfig, SequenceConfig
from docaudit.corpus.documents import Document, Skips
from docaudit.errors import DocauditError
from docaudit.io import jsonable
from docaudit.methods.blind import evaluate_blind, shift_warning
from docaudit.methods.detectors.registry import METHODS, View
from docaudit.metrics import bootstrap_ci, chunk_folds
from docaudit.provenance import document_records, model_record, queried_tokens
from docaudit.query.models import LoadedModel
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext
from docaudit.seeds import stream

SWEPT = ("mink", "minkpp")  # the detectors whose share k is swept
ALL = "all"


def length_bucket(n_words: int, buckets: Sequence[int]) -> int:
    """The WikiMIA length subset (32, 64, 128 or 256 words) a text of ``n_words`` words is nearest to, on a log
    scale (a text of 45 words is in 32, one of 46 in 64; anything longer than 256 words in 256)."""
    return int(buckets[int(np.argmin([abs(np.log2(max(n_words, 1)) - np.log2(b)) for b in buckets]))])


def sweep_column(method: str, k: float) -> str:
    """The column of a swept score: ``mink@0.3``."""
    return f"{method}@{k:g}"


def swept_scores(logp, mu, sigma, config: DetectorConfig, ks: Sequence[float], methods: Sequence[str]) -> dict:
    """Min-K% / Min-K%++ (those of ``methods`` in ``SWEPT``) at every share in ``ks``, from one sequence's arrays."""
    view = View(logp, mu, sigma)
    swept = [m for m in SWEPT if m in methods]
    return {sweep_column(m, k): float(METHODS[m].score(view, replace(config, k=k))) for m in swept for k in ks}


def metric_rows(
    samples: pd.DataFrame, columns: Sequence[str], config: SequenceConfig, seed: int, buckets: bool = True
) -> list[dict]:
    """AUC and TPR at ``config.fprs`` with bootstrap intervals of each score column, over all samples and (with
    ``buckets``) per length bucket holding at least two texts of each class."""
    groups = [(ALL, samples)]
    if buckets:
        groups += [(str(b), part) for b, part in samples.groupby("bucket", sort=True)]
    rows = []
    for name, part in groups:
        labels = part["label"].to_numpy()
        n_pos, n_neg = int(labels.sum()), int((labels == 0).sum())
        if name != ALL and min(n_pos, n_neg) < 2:  # a bucket without two texts of each class is left out
            continue
        for column in columns:
            method, _, k = column.partition("@")
            ci = bootstrap_ci(labels, part[column].to_numpy(), config.n_boot, seed=seed, fprs=config.fprs)
            row = {"method": method, "k": float(k) if k else None, "bucket": name, "n_members": n_pos}
            row["n_nonmembers"] = n_neg
            for key, interval in ci.items():  # a TPR is None where the non-members are too few to estimate it
                point, lo, hi = (None, None, None) if interval is None else interval
                row |= {key: point, f"{key}_ci_low": lo, f"{key}_ci_high": hi}
            rows.append(row)
    return rows


@measured_run("sequence")
def evaluate_sequences(
    members,
    nonmembers,
    models: ModelSpec = ModelSpec(),
    detectors: DetectorSpec = DetectorSpec(),
    config: SequenceConfig = SequenceConfig(),
    recall_prefix: str | None = None,
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> dict:
    """Score every text of both sets with every selected detector and evaluate them at the sequence level.

    ``detectors.freq_corpus``: documents whose token frequencies DC-PDD uses (None: the evaluated texts themselves,
    without their labels). ``recall_prefix``: ReCaLL's non-member prefix (None: ``config.recall_shots`` non-member
    texts, chosen with ``run.seed`` and left out of the evaluation). Returns ``{"metrics": DataFrame, "samples":
    DataFrame, "info": dict}``: one metrics row per method (and swept ``k``) and bucket; one sample row per text
    with ``id``, ``label``, ``group``, ``file``, ``n_words``, ``n_tokens``, ``bucket`` and one column per score."""

    from docaudit.audit.frequencies import set_reference_frequencies
    from docaudit.corpus.documents import labelled_documents
    from docaudit.methods.detectors.detector import build_detector
    from docaudit.methods.detectors.recall import PREFIX_SEPARATOR
    from docaudit.query.models import load_model
    from docaudit.query.querier import query_documents, queryable_documents

    started = time.time()
    skips = Skips() if reading.skips is None else reading.skips
    raw, normalize_chars, progress, detector = reading.raw, reading.normalize_chars, run.progress, detectors.detector
    docs, labels, duplicates = labelled_documents(
        members, nonmembers, raw, progress, skips, reading.drop_duplicates, normalize_chars
    )
    model = models.model
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    scorer = build_detector(
        lm,
        QueryConfig(),
        detectors.methods,
        detector,
        models,
        single_pass=config.max_context,
        seed=run.seed,
    ).on_pool(run.pool)
    keep = queryable_documents(scorer.target, docs, skips)
    docs, labels = [docs[i] for i in keep], labels[keep]
    prefix_ids: list[str] = []
    if "recall" in scorer.methods and not detector.recall_prefix:
        docs, labels, prefix_docs = _take_prefix(docs, labels, recall_prefix, config, run.seed)
        prefix_ids = [d.id for d in prefix_docs]
        text = recall_prefix if recall_prefix is not None else PREFIX_SEPARATOR.join(d.text for d in prefix_docs)
        scorer.config = detector = replace(detector, recall_prefix=text)
    if "recall" in scorer.methods:
        from docaudit.methods.detectors.recall import MISALIGNED, OVER_WINDOW, recall_problem

        problems = [recall_problem(scorer, d.text) for d in docs]
        for kind in (OVER_WINDOW, MISALIGNED):
            keep = skips.select(docs, [p[1] if p and p[0] == kind else None for p in problems], kind)
            docs, labels, problems = [docs[i] for i in keep], labels[keep], [problems[i] for i in keep]
    frequencies_from = set_reference_frequencies(
        scorer, docs, detectors.freq_corpus, raw, normalize_chars, progress, skips
    )
    rows = []
    queried = query_documents(scorer.target, docs, progress)  # on Ray workers inside ``scale_out``
    scores = scorer.score_many([(s.logp, s.mu, s.sigma, d.text, s.targets) for d, s in zip(docs, queried)], progress)
    for doc, label, stats, score in zip(docs, labels, queried, scores):
        n_words = len(doc.text.split())
        rows.append(
            {
                "id": doc.id,
                "label": int(label),
                "group": doc.group,
                "file": doc.path,
                "n_words": n_words,
                "n_tokens": stats.n_tokens,
                "bucket": length_bucket(n_words, config.buckets),
                **score,
                **swept_scores(stats.logp, stats.mu, stats.sigma, detector, config.ks, scorer.methods),
            }
        )
    samples = pd.DataFrame(rows)
    swept = [c for c in samples.columns if "@" in c]
    blind = blind_columns(samples, [d.text for d in docs], labels, config, run.seed)
    metrics = pd.DataFrame(
        metric_rows(samples, [*scorer.methods, *blind], config, run.seed)
        + metric_rows(samples, swept, config, run.seed, buckets=False)
    )
    overall = metrics[(metrics["bucket"] == ALL) & metrics["k"].isna()].set_index("method")["auc"]
    blind_auc = float(overall[blind].max()) if blind else None
    info = {
        "model_identity": lm.identity,
        "model": model_record(lm),
        "inputs": document_records(docs, labels, queried_tokens(docs, queried, whole=False)),
        "seed": run.seed,
        "command": run.command,
        "context": scorer.target.query.context,
        "methods": scorer.methods,
        "detector": replace(detector, recall_prefix=f"{len(detector.recall_prefix)} characters").used(run.seed),
        "sequence": asdict(config),
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "recall_prefix_ids": prefix_ids,
        "frequencies_from": frequencies_from,
        "blind_auc": blind_auc,
        "blind_note": None if blind or not config.blind_folds else f"too few texts for {config.blind_folds} folds",
        "warning": shift_warning(blind_auc, float(overall[list(scorer.methods)].max())),
        "duplicates_dropped": duplicates,
        "skipped": skips.as_json(),
        "wall_seconds": round(time.time() - started, 1),
    }
    return {"metrics": metrics, "samples": samples, "info": info}


def blind_columns(
    samples: pd.DataFrame, texts: list[str], labels: np.ndarray, config: SequenceConfig, seed: int
) -> list[str]:
    """Add each blind-baseline kind's out-of-fold scores to ``samples`` as a column ``blind:KIND`` (texts split in
    ``config.blind_folds`` stratified chunks, each kind fit on the other chunks' texts and labels, no model) and
    return those columns; none when the baseline is off or a class has fewer texts than folds."""
    k = config.blind_folds
    if not k or min(int(labels.sum()), int((labels == 0).sum())) < k:
        return []
    result = evaluate_blind(texts, labels, chunk_folds(labels, k, seed), seed=seed)
    for kind, entry in result["kinds"].items():
        samples[f"blind:{kind}"] = entry["scores"]
    return [f"blind:{kind}" for kind in result["kinds"]]


def _take_prefix(
    docs: list[Document], labels: np.ndarray, given: str | None, config: SequenceConfig, seed: int
) -> tuple[list[Document], np.ndarray, list[Document]]:
    """ReCaLL's prefix shots: none when a prefix is given, else ``recall_shots`` non-members chosen with
    ``seed``, taken out of the evaluated texts (they would otherwise be scored after themselves)."""
    if given is not None:
        return docs, labels, []
    nonmembers = np.flatnonzero(labels == 0)
    if len(nonmembers) <= config.recall_shots:
        raise DocauditError(
            f"ReCaLL takes {config.recall_shots} non-members as its prefix but only {len(nonmembers)} are given: "
            "give more, or a prefix file (--recall-prefix)"
        )
    shots = stream(seed, "recall_shots").choice(nonmembers, config.recall_shots, replace=False)
    rest = np.setdiff1d(np.arange(len(docs)), shots)
    return [docs[i] for i in rest], labels[rest], [docs[i] for i in sorted(shots)]


def sequence_json(result: dict) -> dict:
    """The metrics and the run's information as one JSON-able object (the per-sample scores are written apart)."""
    return jsonable(
        {
            "docaudit_version": __version__,
            "metrics": result["metrics"].to_dict(orient="records"),
            "info": result["info"],
        }
    )
