"""Side-by-side evaluation: the meta-classifier and the sequence-level detectors scaled to documents, all on the
same k-fold chunks (``metrics.chunk_folds(labels, folds, seed)``), in the layout of the paper's Table 4.

Each (method, level) gets, for every fold, the AUC and TPR at 10% / 1% FPR on that fold's test chunk:

- ``meta_classifier`` / ``document``: the random-forest pipeline trained on the other chunks (``classifier.evaluate``);
- ``<detector>`` / ``sequence``, ``doc_avg``, ``doc_threshold``: see :mod:`docaudit.scaling` (only
  ``doc_threshold`` learns something, tau, on the training chunks; the others score the test chunk as is);
- ``blind`` / ``<kind>``: the model-free baselines of :mod:`docaudit.blind` (``tfidf``, ``nb``, ``dates``), fitted
  on the training chunks; ``info["warning"]`` holds its distribution-shift warning when it separates the sets.

Every row also carries the pooled out-of-fold AUC, the one ``roc.png`` draws (``pooled_auc``); document-level rows with
its 95% stratified bootstrap interval over documents (``pooled_auc_ci_low``, ``pooled_auc_ci_high``), which does not
include the variation from refitting. Sequence rows have no interval (null): the sequences of one document are not
independent, and a bootstrap over sequences would be too narrow.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from docaudit import __version__
from docaudit.audit.costs import measured_run
from docaudit.audit.specs import EvaluationSpec
from docaudit.config import (
    MetaConfig,
    QueryConfig,
)
from docaudit.config.rules import MIN_FOLD_DOCUMENTS
from docaudit.corpus.documents import Skips
from docaudit.errors import DocauditError
from docaudit.io import jsonable
from docaudit.methods import beyond_blind
from docaudit.methods.blind import KINDS as BLIND_KINDS
from docaudit.methods.blind import BlindFeatures, evaluate_blind, shift_warning
from docaudit.methods.detectors.detector import build_detector
from docaudit.methods.detectors.registry import METHODS, check_served, resolve_methods
from docaudit.methods.document_level import LEVELS, sequence_scores
from docaudit.methods.meta import classifier as meta_classifier
from docaudit.methods.meta.normalize import served_norms
from docaudit.metrics import (
    LOW_FPRS,
    FoldMetrics,
    bootstrap_ci,
    chunk_folds,
    fold_metrics,
    summarize,
)
from docaudit.provenance import document_records, model_record, queried_tokens
from docaudit.query.models import LoadedModel, backend_name, load_model, served_query
from docaudit.query.querier import SINGLE_PASS_CAP
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext

META = "meta_classifier"


@dataclass
class MethodsEvaluation:
    """``table``: one row per method × level (mean ± std over folds); ``per_fold``: one row per method × level ×
    fold; ``curves``: pooled out-of-fold (labels, scores) per ``(method, level)``; ``info``: what was run;
    ``beyond_blind``: what the model adds over the blind baseline (``methods.beyond_blind``), None when not run;
    ``documents``: one row per document (``document``, ``file``, ``label``, the ``fold`` whose test chunk holds it)
    with its out-of-fold score under each document-level ``method:level``."""

    table: pd.DataFrame
    per_fold: pd.DataFrame
    curves: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    info: dict
    beyond_blind: dict | None = None
    documents: pd.DataFrame | None = None


def _rows(method: str, level: str, folds: list[FoldMetrics], n_test: list[int]):
    fold_rows = [
        {
            "method": method,
            "level": level,
            "fold": i,
            "n_test": n,
            "auc": f.auc,
            **{f"tpr_at_{round(p * 100)}fpr": f.tpr_at[p] for p in LOW_FPRS},
        }
        for i, (f, n) in enumerate(zip(folds, n_test))
    ]
    title = METHODS[method].title if method in METHODS else {"blind": "Blind (model-free)"}.get(method, method)
    return {"method": method, "title": title, "level": level, **summarize(folds), "n_folds": len(folds)}, fold_rows


def _parts(spec: EvaluationSpec) -> tuple[bool, bool, bool]:
    """Whether the meta-classifier, the blind baselines and the beyond-blind comparison run (the cost model's
    variant of ``evaluate``)."""
    blind = bool(spec.blind_kinds)
    return spec.meta is not None, blind, blind and spec.beyond is not None


@measured_run("evaluate", lambda a: _parts(a["spec"]))
def evaluate_methods(
    members,
    nonmembers,
    models: ModelSpec = ModelSpec(),
    query: QueryConfig = QueryConfig(),
    detectors: DetectorSpec = DetectorSpec(),
    spec: EvaluationSpec = EvaluationSpec(),
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> MethodsEvaluation:
    """Evaluate the meta-classifier (unless ``spec.meta`` is None), every selected detector at every level and
    the model-free baselines on the same ``spec.folds`` chunks (seeded by ``run.seed``). Documents are queried once
    with ``query`` (the cache is shared with ``train``); the sequences are that query's windows. A text in both sets
    is an error, or with ``reading.drop_duplicates`` left out of both; documents that cannot be used are left out
    and recorded in ``reading.skips``. ``spec.beyond`` names the membership method compared with the blind baseline."""
    from docaudit.audit.frequencies import set_reference_frequencies
    from docaudit.corpus.documents import labelled_documents
    from docaudit.query.querier import (
        open_querier,
        query_documents,
        queryable_documents,
    )

    started = time.time()
    skips = Skips() if reading.skips is None else reading.skips
    model, ref_model, neighbor_model = models.model, models.ref_model, models.neighbor_model
    meta, folds, seed, progress = spec.meta, spec.folds, run.seed, run.progress
    methods, blind_kinds = _split_blind(detectors.methods, spec.blind_kinds)
    if methods != []:
        backend = backend_name(model)
        methods = resolve_methods(methods, ref_model is not None, neighbor_model is not None, backend)
        check_served(methods, backend)
        meta = None if meta is None else served_norms(meta, backend)
        query = served_query(query, model)
    raw, normalize_chars = reading.raw, reading.normalize_chars
    docs, labels, duplicates = labelled_documents(
        members, nonmembers, raw, progress, skips, reading.drop_duplicates, normalize_chars
    )
    summary_rows, fold_rows, curves, info = [], [], {}, {}
    if methods != []:  # only `--methods blind` needs no model
        lm = model if isinstance(model, LoadedModel) else load_model(model)
        querier = open_querier(lm, query, pool=run.pool, seed=seed)
        keep = queryable_documents(querier, docs, skips)
        docs, labels = [docs[i] for i in keep], labels[keep]
    splits = chunk_folds(labels, folds, seed)
    n_test = [len(test) for _, test in splits]
    test_order = np.concatenate([test for _, test in splits])
    documents = pd.DataFrame(
        {
            "document": [d.id for d in docs],
            "file": [d.path for d in docs],
            "label": labels.astype(int),
            "fold": np.repeat(np.arange(len(splits)), n_test)[np.argsort(test_order)],
        }
    )
    if methods != []:
        # text passes of a sequence (lowercased, augmented, ...) are queried in one window of the widest context
        detector = detectors.detector
        scorer = build_detector(lm, query, methods, detector, models, single_pass=SINGLE_PASS_CAP, seed=seed).on_pool(
            run.pool
        )
        set_reference_frequencies(scorer, docs, detectors.freq_corpus, raw, normalize_chars, progress, skips)
        compared = _beyond_target(spec.beyond, meta, scorer.methods) if blind_kinds else None
        stats = query_documents(querier, docs, progress)
        if meta is not None:
            meta = replace(meta, folds=folds)
            ev = meta_classifier.evaluate(stats, labels, meta, seed, folds=splits, progress=progress)
            row, per = _rows(META, "document", ev.folds, n_test)
            summary_rows.append(row | {"configs": ev.configs})
            fold_rows += per
            curves[(META, "document")] = (ev.labels, ev.scores)
            documents[f"{META}:document"] = ev.scores
            if compared == (META, "document"):
                model_scorer = beyond_blind.meta_scorer(stats, labels, meta, ev.configs, seed)
                model_oof = ev.scores

        seq = sequence_scores(stats, [d.sha256 for d in docs], scorer, spec.scaling, progress, seed)
        for method in scorer.methods:
            values = seq.scores[method]
            if compared is not None and compared[0] == method:
                model_scorer = beyond_blind.level_scorer(values, seq.doc, labels, compared[1])
                model_oof = beyond_blind.out_of_fold(labels, splits, model_scorer)
            for level in spec.levels:
                tested = [LEVELS[level](values, seq.doc, labels, train, test) for train, test in splits]
                row, per = _rows(method, level, [fold_metrics(y, s) for y, s in tested], [len(y) for y, _ in tested])
                summary_rows.append(row)
                fold_rows += per
                curves[(method, level)] = (
                    np.concatenate([y for y, _ in tested]),
                    np.concatenate([s for _, s in tested]),
                )
                if level != "sequence":
                    documents[f"{method}:{level}"] = pd.Series(curves[(method, level)][1], index=test_order)
        info = {
            "model_identity": lm.identity,
            "model": model_record(lm),
            "inputs": document_records(docs, labels, queried_tokens(docs, stats, query.max_tokens)),
            "model_config": asdict(lm.config),
            **({"requests": querier.backend.requests} if querier.backend.requests else {}),
            "query": query.used(seed),
            "text_pass_context": scorer.target.query.context,
            "detector": detector.used(seed),
            "scaling": asdict(spec.scaling),
            "meta": None if meta is None else meta.used(seed),
            "methods": scorer.methods,
            "levels": list(spec.levels),
            "sequences_per_document": np.bincount(seq.doc, minlength=len(docs)).tolist(),
        }

    blind_auc, beyond_result = None, None
    if blind_kinds:
        features = BlindFeatures([d.text for d in docs])
        blind = evaluate_blind(features, labels, splits, kinds=tuple(blind_kinds), seed=seed)
        for kind, entry in blind["kinds"].items():
            row, per = _rows("blind", kind, entry["folds"], n_test)
            summary_rows.append(row)
            fold_rows += per
            curves[("blind", kind)] = (labels, entry["scores"])
            documents[f"blind:{kind}"] = entry["scores"]
        blind_auc = blind["blind_auc"]
        if methods != [] and compared is not None:
            name = META if compared[0] == META else ":".join(compared)
            compared_model = beyond_blind.Candidate(name, model_scorer, model_oof)
            beyond_result = beyond_blind.against_blind(
                labels, splits, features, blind, compared_model, spec.beyond_config, seed
            )
    for row in summary_rows:
        row |= _pooled_interval(*curves[(row["method"], row["level"])], row["level"] != "sequence")
    best = max((r["auc_mean"] for r in summary_rows if r["method"] != "blind"), default=None)
    info |= {
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "duplicates_dropped": duplicates,
        "folds": folds,
        "seed": seed,
        "fold_test_documents": [[docs[i].id for i in test] for _, test in splits],
        "inputs": info.get("inputs") or document_records(docs, labels),
        "command": run.command,
        "blind_auc": blind_auc,
        "warning": shift_warning(blind_auc, best),
        "small_folds_warning": small_folds_warning(labels, splits),
        "skipped": skips.as_json(),
        "wall_seconds": round(time.time() - started, 1),
    }
    return MethodsEvaluation(
        pd.DataFrame(summary_rows), pd.DataFrame(fold_rows), curves, info, beyond_result, documents
    )


def _beyond_target(beyond: str | None, meta: MetaConfig | None, detectors: Sequence[str]) -> tuple | None:
    """``(method, level)`` of the membership scores compared with the blind baseline, checked before any query."""
    if beyond is None:
        return None
    if beyond == "auto":
        return (META, "document") if meta is not None else (detectors[0], "doc_avg")
    if beyond == META:
        if meta is None:
            raise DocauditError("--beyond meta_classifier needs the meta-classifier (drop --no-meta)")
        return META, "document"
    method, _, level = beyond.partition(":")
    level = level or "doc_avg"
    if method not in detectors:
        raise DocauditError(
            f"--beyond {beyond}: '{method}' is not among the evaluated methods ({', '.join([META, *detectors])})"
        )
    if level not in ("doc_avg", "doc_threshold"):
        raise DocauditError(f"--beyond {beyond}: the level must be doc_avg or doc_threshold (a document-level score)")
    return method, level


def _split_blind(methods, blind_kinds):
    """Take ``blind`` out of the method list: it turns the model-free baselines on. A list left empty means that
    only the blind baseline was asked for (no model is loaded); None keeps the default detectors."""
    if methods is None:
        return None, blind_kinds
    names = [n.strip() for n in methods.split(",")] if isinstance(methods, str) else list(methods)
    if "blind" not in names:
        return names, blind_kinds
    return [n for n in names if n and n != "blind"], blind_kinds or BLIND_KINDS


def _pooled_interval(labels, scores, interval: bool = True) -> dict:
    """Pooled out-of-fold AUC with its 95% stratified bootstrap interval over documents (``metrics.bootstrap_ci``);
    without ``interval`` (scores of sequences, not independent) the AUC alone."""
    if not interval:
        from sklearn.metrics import roc_auc_score

        point = float(roc_auc_score(labels, scores)) if len(np.unique(labels)) == 2 else None
        return {"pooled_auc": point, "pooled_auc_ci_low": None, "pooled_auc_ci_high": None}
    ci = bootstrap_ci(labels, scores)["auc"]
    return {"pooled_auc": ci.point, "pooled_auc_ci_low": ci.lo, "pooled_auc_ci_high": ci.hi}


def small_folds_warning(labels: np.ndarray, splits) -> str | None:
    """A warning when a fold's test chunk holds fewer than ``MIN_FOLD_DOCUMENTS`` documents of a class: each fold's
    AUC then moves in large steps, and their mean ± std says little."""
    least = min(min(int((labels[test] == c).sum()) for c in (0, 1)) for _, test in splits)
    if least >= MIN_FOLD_DOCUMENTS:
        return None
    return (
        f"WARNING: small folds. A fold tests as few as {least} document(s) of a class (fewer than "
        f"{MIN_FOLD_DOCUMENTS}), so each fold's AUC moves in large steps and the mean ± std over folds says little; "
        "read the pooled AUC and its interval, and add documents (or use fewer --folds) for folds that mean more."
    )


def evaluation_json(result: MethodsEvaluation) -> dict:
    """The evaluation as one JSON-able object: ``{"methods": [row, ...], "info": {...}}``; each row has
    ``method``, ``level``, the summary metrics and ``fold_aucs``; ``beyond_blind`` is the comparison of the model
    with the blind baseline (null when not run)."""
    rows = []
    for row in result.table.to_dict(orient="records"):
        part = result.per_fold[(result.per_fold.method == row["method"]) & (result.per_fold.level == row["level"])]
        rows.append(row | {"fold_aucs": part.auc.tolist(), "fold_n_test": part.n_test.tolist()})
    return jsonable(
        {"docaudit_version": __version__, "methods": rows, "info": result.info, "beyond_blind": result.beyond_blind}
    )
