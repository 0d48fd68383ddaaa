"""The meta-classifier audit: evaluate it on k-fold chunks beside the blind baseline, fit it, predict with it."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from docaudit import __version__
from docaudit.audit.card_model import card_model, classifier_auc
from docaudit.audit.costs import measured_run
from docaudit.audit.specs import CardAccess
from docaudit.config import (
    DEFAULT_CLASSIFIER,
    FEATURES,
    NORMS,
    BeyondBlindConfig,
    ModelConfig,
    QueryConfig,
    TrainConfig,
)
from docaudit.corpus.documents import (
    Document,
    Skips,
    labelled_documents,
    load_documents,
)
from docaudit.errors import DocauditError
from docaudit.inference.conformal import cross_conformal_p
from docaudit.inference.verdicts import (
    BLIND_GATE_LEVEL,
    DEFAULT_ALPHA,
    Reason,
    run_verdicts,
    smallest_p,
    too_few_of_its_length,
)
from docaudit.methods import beyond_blind
from docaudit.methods.blind import BlindFeatures, evaluate_blind, fit_fold, fitted_on, fold_scores, shift_warning
from docaudit.methods.meta import classifier as meta_classifier
from docaudit.methods.meta.conformal_data import conformal_p_values, fit_conformal_data, load_conformal
from docaudit.methods.meta.folds import conformal_card, load_blind_folds
from docaudit.methods.meta.normalize import NORM_NEEDS, served_norms
from docaudit.methods.meta.persistence import (
    CARD_NORMALIZE_CHARS_BEFORE_FIELD,
    interval_json,
    library_versions,
    load_classifier,
)
from docaudit.metrics import bootstrap_ci, chunk_folds, summarize
from docaudit.provenance import Rows, document_records, model_record, queried_tokens
from docaudit.query.backends.base import provides, require
from docaudit.query.models import LoadedModel, backend_name, check_identity, load_model, served_query
from docaudit.query.querier import (
    open_querier,
    query_documents,
    query_usable,
    queryable_documents,
)
from docaudit.query.sources import EMBEDDED_NAME
from docaudit.run import RunContext

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What ``train`` measured, the classifier fitted on all documents and its card."""

    summary: dict
    evaluation: meta_classifier.Evaluation
    estimator: object
    documents: list[Document]
    skipped: list[dict]
    final_config: str
    card: dict
    out: Path | None = None
    extras: dict = field(default_factory=dict)


def train(
    members,
    nonmembers,
    config: TrainConfig = TrainConfig(),
    model: LoadedModel | None = None,
    run: RunContext = RunContext(),
    skips: Skips | None = None,
    beyond: BeyondBlindConfig = BeyondBlindConfig(),
) -> TrainResult:
    """Query the documents, evaluate the meta-classifier on k-fold chunks beside the blind baseline (and what it
    adds over it, ``methods.beyond_blind`` with ``beyond``), and fit it on all documents; the card holds the
    configuration, model identity and metrics. Documents that cannot be used, and those with fewer than
    ``config.min_tokens`` tokens, are left out and listed (``skips``: where to record them). ``run``: the seed of
    the folds, the forests and the excerpts, progress bars and the Ray pool."""
    skips = Skips() if skips is None else skips
    seed, progress, pool = run.seed, run.progress, run.pool
    target = model or config.model
    config = replace(
        config, meta=served_norms(config.meta, backend_name(target)), query=served_query(config.query, target)
    )
    docs, labels, duplicates = labelled_documents(
        members, nonmembers, config.raw, progress, skips, config.drop_duplicates, config.normalize_chars
    )
    querier = open_querier(target, config.query, pool=pool, seed=seed)
    keep = queryable_documents(querier, docs, skips)
    docs, labels = [docs[i] for i in keep], labels[keep]
    stats = query_documents(querier, docs, progress)
    keep = skips.select(
        docs,
        [
            f"{s.n_tokens} tokens, fewer than --min-tokens {config.min_tokens}"
            if s.n_tokens < config.min_tokens
            else None
            for s in stats
        ],
        "fewer tokens than --min-tokens",
        by_choice=True,
    )
    docs, stats, labels = [docs[i] for i in keep], [stats[i] for i in keep], labels[keep]
    folds = chunk_folds(labels, config.meta.folds, seed)
    evaluation = meta_classifier.evaluate(stats, labels, config.meta, seed, folds=folds, progress=progress)
    features = BlindFeatures([d.text for d in docs])
    blind = evaluate_blind(features, labels, folds, seed=seed)
    compared = beyond_blind.against_blind(
        labels,
        folds,
        features,
        blind,
        beyond_blind.Candidate(
            "meta_classifier",
            beyond_blind.meta_scorer(stats, labels, config.meta, evaluation.configs, seed),
            evaluation.scores,
        ),
        beyond,
        seed,
    )
    estimator = meta_classifier.fit(stats, labels, config.meta, seed, progress)
    conformal, blind_models = conformal_section(evaluation, folds, features, blind, stats, seed)
    pooled = bootstrap_ci(labels, evaluation.scores, seed=seed)
    card = {
        "docaudit_version": __version__,
        **library_versions(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_identity": querier.lm.identity,
        "model": model_record(querier.lm),
        "model_config": asdict(querier.lm.config),
        "tokenizer": querier.lm.tokenizer_hash,
        **({"requests": querier.backend.requests} if querier.backend.requests else {}),
        "query": config.query.used(seed),
        "meta": config.meta.used(seed),
        "seed": seed,
        "raw": config.raw,
        "normalize_chars": config.normalize_chars,
        "min_tokens": config.min_tokens,
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "n_skipped": len(skips.items),
        "inputs": document_records(docs, labels, queried_tokens(docs, stats, config.query.max_tokens)),
        "skipped": skips.as_json(),
        "duplicates_dropped": duplicates,
        "configuration": meta_classifier.chosen(estimator),
        "fold_configurations": evaluation.configs,
        "metrics": evaluation.summary,
        "pooled_bootstrap_95": {k: interval_json(v) for k, v in pooled.items()},
        "quality": QUALITY,
        "fold_aucs": [f.auc for f in evaluation.folds],
        "blind": blind_card(blind),
        "beyond_blind": compared,
        "warning": shift_warning(blind["blind_auc"], pooled["auc"].point),
        "conformal": conformal,
    }
    return TrainResult(
        evaluation.summary,
        evaluation,
        estimator,
        docs,
        skips.as_json(),
        card["configuration"],
        card,
        extras={
            "fold_models": (evaluation.pipelines, blind_models),
            "conformal_data": fit_conformal_data(stats, labels, estimator),
        },
    )


# the one figure of a classifier's quality, used by its card, its shift warning and ``predict``
QUALITY = "pooled out-of-fold AUC with a 95% stratified bootstrap interval over documents (pooled_bootstrap_95.auc)"


def conformal_section(evaluation, folds, features: BlindFeatures, blind: dict, stats, seed: int):
    """What per-document p-values need from training (docs/methods.md, "Per-book p-values"): for each fold, the
    scores its meta-classifier and its blind model (of the best blind kind, refit as evaluated) gave the
    non-members that fold held out; the fewest and the most tokens queried from a known non-member. Returns the card
    section and the fold blind models."""
    labels, kind = evaluation.labels, blind["best_kind"]
    models = fitted_on(blind, kind, folds) or [fit_fold(features, kind, labels, train, seed) for train, _ in folds]
    held_out = [test[labels[test] == 0] for _, test in folds]
    section = {
        "variant": "full-conformal",
        "blind_variant": "cross-conformal",
        "n_nonmembers": int(sum(len(h) for h in held_out)),
        "nonmember_scores": [evaluation.scores[h].tolist() for h in held_out],
        "blind_kind": kind,
        "blind_max_chars": features.max_chars,
        "blind_nonmember_scores": [fold_scores(m, features, kind, h).tolist() for m, h in zip(models, held_out)],
        "nonmember_tokens_min": int(min(stats[i].n_tokens for h in held_out for i in h)),
        "nonmember_tokens_max": int(max(stats[i].n_tokens for h in held_out for i in h)),
    }
    return section, models


def blind_card(blind: dict) -> dict:
    """The JSON-ready part of a blind-baseline result: best AUC and each kind's summary."""
    return {
        "blind_auc": blind["blind_auc"],
        "best_kind": blind["best_kind"],
        "kinds": {kind: v["summary"] for kind, v in blind["kinds"].items()},
    }


def grid(
    members,
    nonmembers,
    config: TrainConfig = TrainConfig(),
    contexts=(32, 64, 128),
    model: LoadedModel | None = None,
    run: RunContext = RunContext(),
    skips: Skips | None = None,
    pool=None,
) -> pd.DataFrame:
    """The paper's Table 1: every normalization × feature extractor × context, on the same folds, from one cache.
    (This is a look at all configurations on the test folds; use ``train`` for an honest choice.) Documents that
    cannot be used are left out and recorded in ``skips``. ``run``: the seed and progress bars (``pool``: the Ray
    pool ``api.on_ray`` opened)."""
    skips = Skips() if skips is None else skips
    seed, progress = run.seed, run.progress
    target = model or config.model
    norms = served_norms(config.meta, backend_name(target)).norms
    config = replace(config, query=served_query(config.query, target))
    docs, labels, _ = labelled_documents(
        members, nonmembers, config.raw, progress, skips, config.drop_duplicates, config.normalize_chars
    )
    lm = model or load_model(config.model)
    queriers = [open_querier(lm, replace(config.query, context=context), pool=pool, seed=seed) for context in contexts]
    keep = queryable_documents(queriers[0], docs, skips)
    docs, labels = [docs[i] for i in keep], labels[keep]
    folds = chunk_folds(labels, config.meta.folds, seed)
    rows = []
    for context, querier in zip(contexts, queriers):
        stats = query_documents(querier, docs, progress)
        for norm in norms:
            for feats in FEATURES:
                meta = replace(config.meta, norm=norm, features=feats)
                ev = meta_classifier.evaluate(stats, labels, meta, seed, folds=folds, progress=False)
                rows.append({"context": context, "norm": norm, "features": feats, **summarize(ev.folds)})
    return pd.DataFrame(rows)


@measured_run("predict")
def predict(
    paths,
    classifier_dir: Path | None = None,
    model: ModelConfig | LoadedModel | None = None,
    access: CardAccess = CardAccess(),
    alpha: float = DEFAULT_ALPHA,
    skips: Skips | None = None,
    run: RunContext = RunContext(),
) -> list[dict]:
    """The verdict on each document under a saved meta-classifier (docs/methods.md, "Per-document p-values in
    predict"): its full-conformal p-value against the classifier's known non-members (the forest refit with the
    document added as a non-member, out-of-bag scores), the cross-conformal blind p-value (a gate), the
    Benjamini–Hochberg q-value over the documents that pass every gate, and "evidence of membership", "no evidence of
    membership" or "inconclusive" with the reason; beside them the classifier's score, its own evaluated AUC and how
    many of each document's tokens were queried. Without ``model``, the card's model is used as ``access`` grants
    it (:func:`card_model`). A different model than the classifier's is refused, a local one before any of its files
    are loaded. Documents are cleaned as the classifier's training documents were (its card's ``raw`` and
    ``normalize_chars``); those that cannot be used are left out and recorded in ``skips``."""
    skips = Skips() if skips is None else skips
    progress = run.progress
    if not 0 < alpha < 1:
        raise DocauditError(f"--alpha must be in (0, 1), got {alpha}")
    directory = Path(classifier_dir or DEFAULT_CLASSIFIER)
    pipe, card = load_classifier(directory)
    conformal = conformal_card(card, directory)
    if conformal is not None:
        blind_models = load_blind_folds(directory, conformal["blind_kind"], len(conformal["nonmember_scores"]))
    if model is None:
        model = card_model(card, access.trust_remote_code, access.use_card_backend, access.user_settings)
    if model is not None:
        norm = card["configuration"].split("+")[0]
        served = [n for n in NORMS if set(NORM_NEEDS[n]) <= provides(backend_name(model))]
        require(backend_name(model), f"this classifier's normalization '{norm}'", NORM_NEEDS[norm], served)
    docs = load_documents(
        paths,
        raw=card["raw"],
        progress=progress,
        skips=skips,
        normalize_chars=card.get("normalize_chars", CARD_NORMALIZE_CHARS_BEFORE_FIELD),
    )
    if isinstance(model, LoadedModel):
        check_identity(model.identity, card["model_identity"])
        lm = model
    else:
        lm = load_model(model, expected_identity=card["model_identity"])
    if lm.precision != (card["model_config"]["quantize"] or card["model_config"]["dtype"]):
        log.warning(
            "classifier trained on %s queries, predicting with %s",
            card["model_config"]["quantize"] or card["model_config"]["dtype"],
            lm.precision,
        )
    reference = getattr(pipe.steps[0][1], "reference_", None)
    if reference is not None and len(reference) < lm.vocab_size:
        raise DocauditError(
            f"this classifier's reference dictionary has {len(reference)} entries, fewer than the model's "
            f"{lm.vocab_size} tokens: it was not trained for this model"
        )
    query, seed = QueryConfig.recorded(card["query"])
    query = served_query(query, lm)
    querier = open_querier(lm, query, pool=run.pool, seed=seed)
    docs = [docs[i] for i in queryable_documents(querier, docs, skips)]
    if not docs:
        return []
    docs, stats = query_usable(querier, docs, skips, progress)
    if not docs:
        return []
    X = meta_classifier.as_documents(stats)
    scores = pipe.predict_proba(X)[:, 1]
    trained_on = training_documents(card)
    p_model = p_blind = compared = [None] * len(docs)
    data = None if conformal is None else load_conformal(directory)
    if conformal is not None:
        kind = conformal["blind_kind"]
        features = BlindFeatures([d.text for d in docs], conformal["blind_max_chars"])
        try:
            if data is not None:
                keys, cap = [d.sha256 for d in docs], query.max_tokens
                p_model, compared = conformal_p_values(data, stats, keys, card["meta"]["seed"], cap)
            p_blind = cross_conformal_p(
                [fold_scores(b, features, kind) for b in blind_models], conformal["blind_nonmember_scores"]
            ).tolist()
        except (ValueError, IndexError, TypeError, AttributeError, KeyError) as e:
            raise DocauditError(f"cannot score with the models in {directory}: {type(e).__name__}: {e}") from e
    p_model = [None if d.sha256 in trained_on else p for d, p in zip(docs, p_model)]
    matched = data is not None and "tokens" in data
    reasons = [
        inconclusive_reasons(card, conformal, s.n_tokens, pb, d.sha256 in trained_on, data is None, matched)
        + (too_few_of_its_length(m, s.n_tokens, alpha) if matched and d.sha256 not in trained_on else [])
        for d, s, pb, m in zip(docs, stats, p_blind, compared)
    ]
    n_nonmembers = None if data is None else int((data["labels"] == 0).sum())
    verdicts = run_verdicts(p_model, reasons, n_nonmembers, alpha)
    auc, lo, hi = classifier_auc(card)
    totals = [total_tokens(lm, query, d.text, s.n_tokens) for d, s in zip(docs, stats)]
    rows = [
        {
            "file": d.path,
            **v.as_dict(),
            "p_value_blind": pb,
            "membership_score": float(score),
            "n_tokens": s.n_tokens,
            "n_tokens_total": total,
            **({"floored_logprobs": s.floored} if lm.config.backend == "openai" else {}),
            "n_known_nonmembers": n_nonmembers,
            "n_compared": m,
            "smallest_p": None if (ranked := m if matched else n_nonmembers) is None else smallest_p(ranked),
            "alpha": alpha,
            "blind_gate_level": BLIND_GATE_LEVEL,
            "classifier_auc": auc,
            "classifier_auc_ci_low": lo,
            "classifier_auc_ci_high": hi,
        }
        for d, s, score, v, pb, total, m in zip(docs, stats, scores, verdicts, p_blind, totals, compared)
    ]
    tokens = {str(d.path): (s.n_tokens, total) for d, s, total in zip(docs, stats, totals)}
    record = model_record(lm)
    if record["id"] is None and lm.config.backend != "openai":
        record["id"] = EMBEDDED_NAME  # the embedded default is loaded without a name
    return Rows(rows, document_records(docs, tokens=tokens), record, seed)


RETRAIN = Reason(
    "retrain",
    "this classifier was saved without what per-document p-values need (its fold models, or the training "
    "features of the full-conformal p-value, conformal.skops): train it again with `docaudit train` (the same "
    "options) to get them",
)


LONGEST_UNKNOWN = Reason(
    "retrain",
    "this classifier was saved without the token count of its longest known non-member, so a document longer "
    "than every one of them cannot be told apart: train it again with `docaudit train` (the same options)",
)


def training_documents(card: dict) -> set[str]:
    """The SHA-256 of the texts the classifier was trained on (its card's ``inputs``; empty for older cards)."""
    inputs = card.get("inputs")
    if not isinstance(inputs, list):
        return set()
    return {r["sha256"] for r in inputs if isinstance(r, dict) and isinstance(r.get("sha256"), str)}


def inconclusive_reasons(
    card: dict,
    conformal: dict | None,
    n_tokens: int,
    p_blind: float | None,
    trained_on: bool = False,
    retrain: bool = False,
    matched: bool = False,
) -> list[Reason]:
    """Why a document's p-value under this classifier cannot be read as evidence either way (empty: it can):
    ``conformal`` is the card's checked section (None: no fold models), ``retrain`` says the folder lacks the
    full-conformal training features, ``matched`` that its p-value ranks the document among the non-members of its
    length class (then ``inference.verdicts.too_few_of_its_length`` replaces the token gates). The blind gate's level is
    ``BLIND_GATE_LEVEL``, not the verdict's ``--alpha``."""
    reasons = []
    if trained_on:
        reasons.append(
            Reason(
                "training_document",
                "a training document of this classifier: it was fit as a member or non-member, so its p-value "
                "says nothing about the language model",
            )
        )
    if conformal is None or retrain:
        reasons.append(RETRAIN)
    if conformal is None:
        return reasons
    auc, lo, hi = classifier_auc(card)
    if lo <= 0.5 <= hi:
        reasons.append(
            Reason(
                "classifier_at_chance",
                f"the classifier's own AUC {auc:.3f} (95% interval {lo:.3f}-{hi:.3f}) includes 0.5: on its own "
                "evaluation it does not tell members from non-members better than chance",
            )
        )
    blind = card.get("blind")
    if isinstance(blind, dict) and shift_warning(blind.get("blind_auc"), auc):
        reasons.append(
            Reason(
                "distribution_shift",
                f"its blind baseline (no language model) told its training sets apart with AUC "
                f"{blind['blind_auc']:.3f} ({blind.get('best_kind')}) against the classifier's {auc:.3f}: the sets "
                "differ by their text alone (era, formatting), so the classifier's scores may reflect that, not "
                "training",
            )
        )
    if trained_on:  # its own blind p-value and token count are beside the point
        return reasons
    if p_blind is not None and p_blind < BLIND_GATE_LEVEL:
        reasons.append(
            Reason(
                "blind_separates",
                f"the blind baseline already separates this document from the known non-members (p_value_blind "
                f"{p_blind:.3g} < {BLIND_GATE_LEVEL:g}): it differs from them by its text alone",
            )
        )
    if matched:
        return reasons
    if n_tokens < conformal["nonmember_tokens_min"]:
        reasons.append(
            Reason(
                "too_few_tokens",
                f"too few tokens queried: {n_tokens}, fewer than the {conformal['nonmember_tokens_min']} of every "
                "known non-member it is compared with",
            )
        )
    longest = conformal.get("nonmember_tokens_max")
    if longest is None and (card.get("query") or {}).get("max_tokens") is None:
        reasons.append(LONGEST_UNKNOWN)  # without a token budget nothing bounds a document's length
    elif longest is not None and n_tokens > longest:
        reasons.append(
            Reason(
                "too_many_tokens",
                f"too many tokens queried: {n_tokens}, more than the {longest} of every known non-member it is "
                "compared with (a longer document's features are not like theirs)",
            )
        )
    return reasons


def total_tokens(lm: LoadedModel, query: QueryConfig, text: str, n_queried: int) -> int:
    """The document's length in tokens (tokenized as the querier does), of which ``n_queried`` were queried."""
    if query.max_tokens is None or n_queried < query.max_tokens:
        return n_queried
    return len(lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
