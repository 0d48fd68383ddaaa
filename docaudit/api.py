"""The Python API behind the CLI: query documents, train and evaluate the meta-classifier, predict."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from . import classifier as meta_classifier
from .blind import evaluate_blind, shift_warning
from .cache import StatsCache, atomic_write_text
from .config import FEATURES, NORMS, ModelConfig, QueryConfig, TrainConfig
from .data import Document, Skips, duplicates_note, load_documents, separate_sets
from .errors import DocauditError
from .lm import LoadedModel, check_identity, load_model
from .metrics import bootstrap_ci, chunk_folds, summarize
from .querier import Querier
from .outputs import prepare_output, staged_dir
from .report import format_query, format_summary, plot_roc, roc_frame
from .stats import TokenStats

log = logging.getLogger(__name__)

# The shipped classifier and manifests live at the repository's top level (models/, data_manifests/); the links in
# docaudit/_shipped/ point there, so the same paths work in a checkout and, as package data, in a wheel.
PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_CLASSIFIER = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-pg"
MANIFESTS_DIR = PACKAGE_DIR / "_shipped" / "data_manifests"
# cards written before the ``normalize_chars`` field existed were trained on character-normalized text
CARD_NORMALIZE_CHARS_BEFORE_FIELD = True


def open_querier(model: ModelConfig | LoadedModel, query: QueryConfig, cache: bool = True) -> Querier:
    """A querier over a model (loaded here unless given), caching its TokenStats."""
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    return Querier(lm, query, StatsCache() if cache else None)


def query_documents(querier: Querier, docs: list[Document], progress: bool = True) -> list[TokenStats]:
    return querier.stats_many(((d.text, d.sha256) for d in docs), total=len(docs), progress=progress)


def queryable_documents(querier: Querier, docs: list[Document], skips: Skips) -> list[int]:
    """Indices of the documents the querier can query; the others (fewer than 2 tokens) are skipped."""
    return skips.select(docs, [querier.too_short(d.text) for d in docs], "too short")


def labelled_documents(members, nonmembers, raw: bool = False, progress: bool = True, skips: Skips | None = None,
                       drop_duplicates: bool = False, normalize_chars: bool = False):
    """Documents of both classes, their labels (1 = member) and the documents found in both sets
    (``data.separate_sets``: an error, or with ``drop_duplicates`` left out of both). Documents that cannot be used
    are recorded in ``skips`` and left out (without ``skips`` they are an error)."""
    pos = load_documents(members, raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars)
    neg = load_documents(nonmembers, raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars)
    pos, neg, duplicates = separate_sets(pos, neg, drop_duplicates)
    return pos + neg, np.array([1] * len(pos) + [0] * len(neg)), duplicates


@dataclass
class TrainResult:
    """What ``train`` measured and saved."""

    summary: dict
    evaluation: meta_classifier.Evaluation
    documents: list[Document]
    skipped: list[dict]
    final_config: str
    card: dict
    out: Path | None = None
    extras: dict = field(default_factory=dict)


def train(members, nonmembers, config: TrainConfig = TrainConfig(), out: Path | None = None,
          model: LoadedModel | None = None, progress: bool = True, overwrite: bool = False,
          skips: Skips | None = None) -> TrainResult:
    """Query the documents, evaluate the meta-classifier on k-fold chunks, fit it on all documents and save it
    (with its card: config, model identity, metrics) to ``out``, a new or empty folder, or an earlier classifier
    with ``overwrite`` (checked first: ``outputs.prepare_output``). Documents that cannot be used, and those with
    fewer than ``config.min_tokens`` tokens, are left out and listed (``skips``: where to record them)."""
    if out is not None:
        prepare_output(out, "classifier", overwrite, [*_as_list(members), *_as_list(nonmembers)])
    skips = Skips() if skips is None else skips
    docs, labels, duplicates = labelled_documents(members, nonmembers, config.raw, progress, skips,
                                                  config.drop_duplicates, config.normalize_chars)
    querier = open_querier(model or config.model, config.query)
    keep = queryable_documents(querier, docs, skips)
    docs, labels = [docs[i] for i in keep], labels[keep]
    stats = query_documents(querier, docs, progress)
    keep = skips.select(docs, [f"{s.n_tokens} tokens, fewer than --min-tokens {config.min_tokens}"
                               if s.n_tokens < config.min_tokens else None for s in stats],
                        "fewer tokens than --min-tokens", by_choice=True)
    docs, stats, labels = [docs[i] for i in keep], [stats[i] for i in keep], labels[keep]
    folds = chunk_folds(labels, config.meta.folds, config.meta.seed)
    evaluation = meta_classifier.evaluate(stats, labels, config.meta, folds=folds, progress=progress)
    blind = evaluate_blind([d.text for d in docs], labels, folds, seed=config.meta.seed)
    estimator = meta_classifier.fit(stats, labels, config.meta)
    card = {
        "docaudit_version": __version__,
        **meta_classifier.library_versions(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_identity": querier.lm.identity,
        "model_config": asdict(querier.lm.config),
        "tokenizer": querier.lm.tokenizer_hash,
        "query": config.query.used(),
        "meta": asdict(config.meta),
        "raw": config.raw,
        "normalize_chars": config.normalize_chars,
        "min_tokens": config.min_tokens,
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "n_skipped": len(skips.items),
        "skipped": skips.as_json(),
        "duplicates_dropped": duplicates,
        "configuration": meta_classifier.chosen(estimator),
        "fold_configurations": evaluation.configs,
        "metrics": evaluation.summary,
        "pooled_bootstrap_95": {k: v._asdict() for k, v in bootstrap_ci(labels, evaluation.scores, seed=config.meta.seed).items()},
        "fold_aucs": [f.auc for f in evaluation.folds],
        "blind": blind_card(blind),
        "warning": shift_warning(blind["blind_auc"], evaluation.summary["auc_mean"]),
    }
    result = TrainResult(evaluation.summary, evaluation, docs, skips.as_json(), card["configuration"], card, out)
    if out is not None:
        save_model_dir(Path(out), estimator, card, evaluation, overwrite)
    return result


def _as_list(paths) -> list:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def blind_card(blind: dict) -> dict:
    """The JSON-ready part of a blind-baseline result: best AUC and each kind's summary."""
    return {"blind_auc": blind["blind_auc"], "best_kind": blind["best_kind"],
            "kinds": {kind: v["summary"] for kind, v in blind["kinds"].items()}}


def save_model_dir(out: Path, estimator, card: dict, evaluation: meta_classifier.Evaluation,
                   overwrite: bool = False) -> None:
    """Write classifier, card, ROC CSV/PNG into a temporary directory, then swap it into place."""
    with staged_dir(out, "classifier", overwrite) as tmp:
        meta_classifier.save_classifier(tmp, estimator, card)
        curves = {f"fold {i + 1}": (evaluation.labels[evaluation.fold_of == i], evaluation.scores[evaluation.fold_of == i])
                  for i in range(len(evaluation.folds))}
        curves["pooled out-of-fold"] = (evaluation.labels, evaluation.scores)
        frame = roc_frame(curves)
        frame.to_csv(tmp / "roc.csv", index=False)
        plot_roc(frame, tmp / "roc.png", title=f"docaudit meta-classifier ({card['configuration']})",
                 highlight="pooled out-of-fold")
        atomic_write_text(tmp / "card.md", model_card_markdown(card))


def text_cleaning(card: dict) -> str:
    """How a classifier's documents were cleaned, in words (from its card)."""
    if card.get("raw", False):
        return "as in the files (no cleaning)"
    if card.get("normalize_chars", CARD_NORMALIZE_CHARS_BEFORE_FIELD):
        return "boilerplate removed; typographic characters, emphasis markup and whitespace normalized"
    return "boilerplate removed; characters as in the files"


def chance_level(card: dict) -> bool:
    """Whether the pooled out-of-fold AUC's bootstrap interval includes 0.5."""
    auc = card["pooled_bootstrap_95"]["auc"]
    return includes_chance((auc["lo"], auc["hi"]))


def includes_chance(interval) -> bool:
    lo, hi = interval
    return lo <= 0.5 <= hi


def model_card_markdown(card: dict) -> str:
    q, m = card["query"], card["meta"]
    lines = [
        f"# docaudit meta-classifier — {card['configuration']}",
        "",
        f"- target model: `{card['model_identity']}` ({card['model_config']['quantize'] or card['model_config']['dtype']})",
        f"- query: {format_query(q)}",
        f"- documents: {card['n_members']} members, {card['n_nonmembers']} non-members ({card['n_skipped']} skipped"
        f"{duplicates_note(card.get('duplicates_dropped'), '; ')})",
        f"- text: {text_cleaning(card)}",
        f"- selection: norm={m['norm']}, features={m['features']}; chosen per fold: {', '.join(card['fold_configurations'])}",
        f"- {m['folds']}-fold chunks: {format_summary(card['metrics'])}",
        "- pooled out-of-fold AUC {point:.3f} (95% bootstrap interval over documents {lo:.3f}–{hi:.3f})".format(
            **card["pooled_bootstrap_95"]["auc"]),
    ]
    if chance_level(card):
        lines.append("- the interval includes 0.5: on its own evaluation this classifier does not detect membership "
                     "better than chance, so its predictions are not evidence either way")
    if "blind" in card:
        lines.append(f"- model-free blind baseline on the same folds: AUC {card['blind']['blind_auc']:.3f} "
                     f"({card['blind']['best_kind']})")
    if card.get("warning"):
        lines += ["", f"**{card['warning']}**"]
    return "\n".join(lines) + "\n"


def grid(members, nonmembers, config: TrainConfig = TrainConfig(), contexts=(32, 64, 128),
         model: LoadedModel | None = None, progress: bool = True, skips: Skips | None = None) -> pd.DataFrame:
    """The paper's Table 1: every normalization × feature extractor × context, on the same folds, from one cache.
    (This is a look at all configurations on the test folds; use ``train`` for an honest choice.) Documents that
    cannot be used are left out and recorded in ``skips``."""
    skips = Skips() if skips is None else skips
    docs, labels, _ = labelled_documents(members, nonmembers, config.raw, progress, skips, config.drop_duplicates,
                                         config.normalize_chars)
    lm = model or load_model(config.model)
    queriers = [open_querier(lm, replace(config.query, context=context)) for context in contexts]
    keep = queryable_documents(queriers[0], docs, skips)
    docs, labels = [docs[i] for i in keep], labels[keep]
    folds = chunk_folds(labels, config.meta.folds, config.meta.seed)
    rows = []
    for context, querier in zip(contexts, queriers):
        stats = query_documents(querier, docs, progress)
        for norm in NORMS:
            for feats in FEATURES:
                meta = replace(config.meta, norm=norm, features=feats)
                ev = meta_classifier.evaluate(stats, labels, meta, folds=folds, progress=False)
                rows.append({"context": context, "norm": norm, "features": feats, **summarize(ev.folds)})
    return pd.DataFrame(rows)


def card_model(card: dict, trust_remote_code: bool = False) -> ModelConfig:
    """The model a classifier was trained for, as its card names it. ``trust_remote_code`` comes from the caller
    (the user's own flag), never from the card. A local model that is not where the card says is an error here,
    never a hub request."""
    config = replace(ModelConfig(**card["model_config"]), trust_remote_code=trust_remote_code)
    if config.model is not None and not card["model_identity"].startswith("hub:"):
        where = Path(config.model)
        if not where.is_absolute():
            raise DocauditError(f"this classifier's card names its model by the relative path '{config.model}', "
                                "which cannot be found from here: pass --model with that model (a copy is accepted)")
        if not where.exists():
            raise DocauditError(f"the model this classifier was trained for is no longer at {config.model}: pass "
                                "--model with that model (a copy is accepted)")
    return config


def predict(paths, classifier_dir: Path | None = None, model: ModelConfig | LoadedModel | None = None,
            progress: bool = True, skips: Skips | None = None, trust_remote_code: bool = False) -> list[dict]:
    """Membership probability of each document under a saved meta-classifier, with the classifier's own evaluated
    AUC and interval and how many of each document's tokens were queried. Without ``model``, the card's model is
    used (with ``trust_remote_code`` only as given here). A different model than the classifier's is refused, a local
    one before any of its files are loaded. Documents are cleaned as the classifier's training documents were (its
    card's ``raw`` and ``normalize_chars``); those that cannot be used are left out and recorded in ``skips``."""
    skips = Skips() if skips is None else skips
    pipe, card = meta_classifier.load_classifier(Path(classifier_dir or DEFAULT_CLASSIFIER))
    docs = load_documents(paths, raw=card["raw"], progress=progress, skips=skips,
                          normalize_chars=card.get("normalize_chars", CARD_NORMALIZE_CHARS_BEFORE_FIELD))
    if isinstance(model, LoadedModel):
        check_identity(model.identity, card["model_identity"])
        lm = model
    else:
        lm = load_model(model or card_model(card, trust_remote_code), expected_identity=card["model_identity"])
    if lm.precision != (card["model_config"]["quantize"] or card["model_config"]["dtype"]):
        log.warning("classifier trained on %s queries, predicting with %s",
                    card["model_config"]["quantize"] or card["model_config"]["dtype"], lm.precision)
    query = QueryConfig(**card["query"])
    querier = open_querier(lm, query)
    docs = [docs[i] for i in queryable_documents(querier, docs, skips)]
    stats = query_documents(querier, docs, progress)
    probs = pipe.predict_proba(meta_classifier.as_documents(stats))[:, 1]
    auc = card["pooled_bootstrap_95"]["auc"]
    return [{"file": d.path, "membership_probability": float(p), "prediction": "member" if p >= 0.5 else "non-member",
             "n_tokens": s.n_tokens, "n_tokens_total": total_tokens(lm, query, d.text, s.n_tokens),
             "classifier_auc": auc["point"], "classifier_auc_ci": [auc["lo"], auc["hi"]]}
            for d, s, p in zip(docs, stats, probs)]


def total_tokens(lm: LoadedModel, query: QueryConfig, text: str, n_queried: int) -> int:
    """The document's length in tokens (tokenized as the querier does), of which ``n_queried`` were queried."""
    if query.max_tokens is None or n_queried < query.max_tokens:
        return n_queried
    return len(lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
