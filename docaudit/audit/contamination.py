"""Per-book contamination rates (Min-K% Prob paper, sec. 5; docs/methods.md, "Contamination rate").

1. Snippets: from each book, ``snippets`` random non-overlapping runs of ``snippet_words`` consecutive words
   (whitespace-separated; the snippet is the book's text from the first word's start to the last word's end, so
   line breaks are kept), drawn uniformly over all non-overlapping placements, seeded by the seed and the book's
   hash. A book with fewer than ``snippets x snippet_words`` words gives as many as fit (a warning says how many
   books and the rates rest on their actual count); snippets never share a word, and ``overlapping_snippets``
   counts, from the drawn start words, any that would.
2. Scoring: each snippet is its own text, queried through the cached querier in one window when it fits: the
   context is the model's maximum positions capped at ``max_context`` (2048 by default). A snippet with more
   tokens than that is scored over its windows (counted in ``info["snippets_over_context"]``).
3. Calibration: snippets of known member and known non-member books; the threshold ``tau`` maximizes the snippet
   accuracy of "``score > tau`` is a member", or with ``target_fpr`` it is the lowest ``tau`` whose false-positive
   rate on the non-member snippets is at most that (``inference.calibration.threshold``, the one rule).
4. Audit: a book's contamination rate is the share of its snippets scoring above ``tau``, with a Wilson score
   interval for a binomial proportion at ``confidence`` (95% by default). The interval treats the (disjoint)
   snippets as independent draws and ``tau`` as fixed: it ignores the correlation of passages of one book and the
   calibration's own noise.
   When the calibration cannot support a verdict (snippet AUC below 0.60, FPR at the threshold above 50%, TPR not
   above FPR: ``inference.calibration.calibration_problems``), ``info["warning"]`` says so and every verdict is
   "inconclusive" with that reason (``audit.book_verdicts``).
   Beside it, a book-level bootstrap interval (``book_ci_low``, ``book_ci_high``,
   ``inference.calibration.calibration_bootstrap``): each of ``book_bootstrap`` resamples draws the calibration
   books of each class with replacement (so the threshold moves as it would with other calibration books) and the
   audited book's snippets with replacement, and recomputes the rate.
5. Beyond the blind baseline: on the calibration books, a book's mean snippet score is compared with a blind
   classifier of the books' texts (``methods.beyond_blind``, ``info["beyond_blind"]``): if the calibration sets
   differ by era or topic, a separation of their snippets is not evidence that the method detects training. The
   blind baseline's own AUC on the calibration books is ``info["blind_auc"]``, with the warning ``evaluate`` gives
   when it is high (``info["blind_warning"]``, ``methods.blind.shift_warning``).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from docaudit.audit.book_verdicts import blind_p_values, book_verdicts
from docaudit.audit.specs import ReportSpec
from docaudit.config import (
    BeyondBlindConfig,
    ContaminationConfig,
    DetectorConfig,
    QueryConfig,
    check_range,
)
from docaudit.corpus.documents import Document, Skips, load_documents, separate_sets
from docaudit.errors import DocauditError
from docaudit.inference.calibration import calibration_bootstrap
from docaudit.methods import beyond_blind
from docaudit.methods.blind import BlindFeatures, evaluate_blind, shift_warning
from docaudit.methods.detectors.detector import Detector, build_detector
from docaudit.methods.detectors.registry import METHODS
from docaudit.metrics import chunk_folds
from docaudit.outputs import provenance
from docaudit.provenance import document_records, model_record
from docaudit.query.models import LoadedModel, load_model
from docaudit.run import DocumentSpec, ModelSpec, RunContext
from docaudit.seeds import stream

_WORD = re.compile(r"\S+")


def too_short(doc: Document, words: int) -> str | None:
    """Why the book cannot give one snippet of ``words`` words, or None."""
    n = len(_WORD.findall(doc.text))
    return f"too short for one snippet of {words} words (it has {n} words)" if n < words else None


def snippet_starts(n_words: int, n: int, words: int, rng: np.random.Generator) -> np.ndarray:
    """Start words of ``min(n, n_words // words)`` non-overlapping runs of ``words`` words among ``n_words``,
    uniformly over all such placements: ``k`` sorted distinct draws ``p_i`` from ``n_words - k (words - 1)``
    slots, and ``start_i = p_i + i (words - 1)``, so consecutive starts are at least ``words`` apart."""
    k = min(n, n_words // words)
    slots = np.sort(rng.choice(n_words - k * (words - 1), size=k, replace=False))
    return slots + np.arange(k) * (words - 1)


def book_snippets(doc: Document, n: int, words: int, seed: int = 0) -> list[tuple[int, str]]:
    """``(start word, text)`` of up to ``n`` random non-overlapping snippets of ``words`` consecutive words of a
    book (fewer when the book has fewer than ``n x words`` words: as many as fit)."""
    spans = [m.span() for m in _WORD.finditer(doc.text)]
    if len(spans) < words:
        raise DocauditError(f"{doc.path}: {too_short(doc, words)}")
    rng = stream(seed, "snippets", int(doc.sha256[:12], 16))
    starts = snippet_starts(len(spans), n, words, rng)
    return [(int(s), doc.text[spans[s][0] : spans[s + words - 1][1]]) for s in starts]


def overlapping_snippets(starts, words: int) -> int:
    """How many snippets (by their start words) share a word with another snippet."""
    starts = np.sort(np.asarray(starts))
    close = np.diff(starts) < words
    return int((np.r_[close, False] | np.r_[False, close]).sum())


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n``; it always contains ``k / n``."""
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, min(center - half, p)), min(1.0, max(center + half, p))


def word_count(doc: Document) -> int:
    """The book's words, as snippets count them (whitespace-separated)."""
    return len(_WORD.findall(doc.text))


def overlap_warning(books: pd.DataFrame, snippets: int, words: int) -> str | None:
    """The warning when some books gave fewer snippets than asked (fewer than ``snippets x words`` words: as many
    non-overlapping snippets as fit), or, should any snippets overlap, how many."""
    parts = []
    short = books[books.n_snippets < snippets]
    if not short.empty:
        parts.append(
            f"{len(short)} of {len(books)} books have fewer than {snippets} x {words} words and gave fewer "
            f"non-overlapping snippets than the {snippets} asked (e.g. {short.book.iloc[0]}: "
            f"{short.n_snippets.iloc[0]} snippets from {short.n_words.iloc[0]} words); their rates rest on fewer "
            "snippets and their intervals are wider"
        )
    overlapping = int(books.overlapping_snippets.sum())
    if overlapping:
        parts.append(
            f"{overlapping} snippets overlap another of their book: they are not independent, so the Wilson "
            "interval is too narrow"
        )
    return f"WARNING: {'; '.join(parts)}." if parts else None


def threshold_warning(tau: float) -> str | None:
    """The warning when the calibration put the threshold at -inf or +inf: every rate is then 100% or 0%."""
    if math.isfinite(tau):
        return None
    called, rate = ("a member", "100%") if tau < 0 else ("a non-member", "0%")
    return (
        f"WARNING: the threshold is {tau}: on the calibration books no cut does better than calling every snippet "
        f"{called}, so every rate is {rate} and says nothing about the book."
    )


def book_bootstrap(
    snip: pd.DataFrame, target_fpr: float | None, n_boot: int, confidence: float, seed: int
) -> pd.DataFrame:
    """Per audited book the book-level interval of its rate (``inference.calibration.calibration_bootstrap``: the
    calibration books of each class resampled, the threshold chosen again, the book's snippets resampled). Columns
    ``book``, ``file``, ``book_ci_low``, ``book_ci_high``."""
    groups = {
        role: list(snip[snip.role == role].groupby(["book", "file"], sort=False))
        for role in ("member", "non-member", "audited")
    }
    members, nonmembers, audited = ([part.score.to_numpy() for _, part in groups[r]] for r in groups)
    lo, hi = calibration_bootstrap(members, nonmembers, audited, target_fpr, n_boot, confidence, seed)
    keys = [key for key, _ in groups["audited"]]
    return pd.DataFrame(
        {"book": [k[0] for k in keys], "file": [k[1] for k in keys], "book_ci_low": lo, "book_ci_high": hi}
    )


@dataclass
class ContaminationReport:
    """``books``: audited books (rate and interval), sorted by rate; ``calibration``: the same per calibration
    book, with its label; ``snippets``: every snippet score; ``threshold``; ``info``: settings and calibration
    metrics."""

    books: pd.DataFrame
    calibration: pd.DataFrame
    snippets: pd.DataFrame
    threshold: float
    info: dict


def _score_books(
    detector: Detector, docs: list[Document], role: str, config: ContaminationConfig, run: RunContext
) -> list[dict]:
    method, n, words, seed, progress = config.method, config.snippets, config.snippet_words, run.seed, run.progress
    if detector.target.pool is not None:  # every snippet and its extra passes on the Ray workers at once
        snippets = [t for d in docs for _, t in book_snippets(d, n, words, seed)]
        detector.target.prefetch([(t, None) for t in snippets], progress)
        detector.prefetch(snippets, progress)
    rows = []
    for doc in tqdm(docs, desc=f"{role} books", unit="book", disable=not progress):
        drawn = book_snippets(doc, n, words, seed)
        queried = detector.target.stats_local([(t, None) for _, t in drawn], progress=False)
        scores = detector.score_many([(s.logp, s.mu, s.sigma, t) for s, (_, t) in zip(queried, drawn)])
        for i, ((start, _), stats, row) in enumerate(zip(drawn, queried, scores)):
            score = row[method]
            rows.append(
                {
                    "role": role,
                    "book": doc.id,
                    "file": doc.path,
                    "snippet": i,
                    "start_word": start,
                    "n_tokens": stats.n_tokens,
                    "score": score,
                }
            )
    return rows


def _rates(snippets: pd.DataFrame, tau: float, confidence: float) -> pd.DataFrame:
    rows = []
    for (book, file), part in snippets.groupby(["book", "file"], sort=False):
        k, n = int((part.score > tau).sum()), len(part)
        lo, hi = wilson_interval(k, n, confidence)
        rows.append(
            {
                "book": book,
                "file": file,
                "n_snippets": n,
                "n_above": k,
                "contamination_rate": k / n,
                "ci_low": lo,
                "ci_high": hi,
                "mean_score": float(part.score.mean()),
            }
        )
    return pd.DataFrame(rows)


def contamination_report(
    books,
    calibrate_members,
    calibrate_nonmembers,
    models: ModelSpec = ModelSpec(),
    detector: DetectorConfig = DetectorConfig(),
    spec: ReportSpec = ReportSpec(),
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> ContaminationReport:
    """Calibrate a snippet threshold on known member and non-member books, then measure each audited book's
    contamination rate (see the module docstring) with the detector ``spec.contamination.method``, seeded by
    ``run.seed``. Every input is checked before the model is loaded; a book in both calibration sets is an error, or
    with ``reading.drop_duplicates`` left out of both; books that cannot be used (unreadable, too short for one
    snippet ...) are left out and recorded in ``reading.skips``. ``spec.contamination.book_bootstrap`` is the
    number of resamples of the book-level interval (and of the debiased fraction's). The command line of ``run``
    is written into the report's provenance."""
    from sklearn.metrics import roc_auc_score

    started = time.time()
    config, beyond, alpha, seed = spec.contamination, spec.beyond, spec.alpha, run.seed
    method, snippets, snippet_words = config.method, config.snippets, config.snippet_words
    target_fpr = config.target_fpr
    max_context, confidence, book_bootstrap_samples = config.max_context, config.confidence, config.book_bootstrap
    skips = Skips() if reading.skips is None else reading.skips
    if method not in METHODS:
        raise DocauditError(f"unknown method '{method}': choose from {', '.join(METHODS)}")
    if snippets < 1 or snippet_words < 1:
        raise DocauditError(f"need at least one snippet of at least one word (got {snippets} of {snippet_words})")
    if not 0 < confidence < 1:
        raise DocauditError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 < alpha < 1:
        raise DocauditError(f"--alpha must be in (0, 1), got {alpha}")
    check_range("--max-context", max_context, 2)
    check_range("--book-bootstrap", book_bootstrap_samples, 1)
    groups = {}
    for role, paths in (("member", calibrate_members), ("non-member", calibrate_nonmembers), ("audited", books)):
        if not paths:
            what = "books to audit" if role == "audited" else f"calibration books of class {role}"
            raise DocauditError(f"no {what} given")
        docs = load_documents(
            paths, raw=reading.raw, progress=False, skips=skips, normalize_chars=reading.normalize_chars
        )
        groups[role] = [docs[i] for i in skips.select(docs, [too_short(d, snippet_words) for d in docs], "too short")]
    groups["member"], groups["non-member"], duplicates = separate_sets(
        groups["member"],
        groups["non-member"],
        reading.drop_duplicates,
        ("calibration members", "calibration non-members"),
    )

    model = models.model
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    scorer = build_detector(
        lm,
        QueryConfig(),
        [method],
        detector,
        ModelSpec(
            ref_model=models.ref_model if method == "ref" else None,
            neighbor_model=models.neighbor_model if method == "neighbor" else None,
        ),
        single_pass=max_context,
        seed=seed,
    ).on_pool(run.pool)
    scored = {role: _score_books(scorer, docs, role, config, run) for role, docs in groups.items()}
    snip = pd.DataFrame([r for rows in scored.values() for r in rows])

    beyond_result, blind = _calibration_beyond_blind(groups, snip, method, beyond, seed)
    blind_folds = min(beyond.folds, len(groups["member"]), len(groups["non-member"]))
    blind_p = blind_p_values(groups, blind, blind_folds, seed)
    verdicts, verdict_info = book_verdicts(snip, config, seed, blind_p, alpha, spec.n_methods)
    tau = verdict_info["threshold"]
    cal = snip[snip.role != "audited"]
    y = (cal.role == "member").to_numpy().astype(int)
    calibration = pd.concat(
        [_rates(cal[cal.role == r], tau, confidence).assign(label=r) for r in ("member", "non-member")],
        ignore_index=True,
    )
    words = pd.DataFrame(
        [
            {"book": d.id, "file": d.path, "n_words": word_count(d), "title": d.title, "author": d.author}
            for docs in groups.values()
            for d in docs
        ]
    ).drop_duplicates(["book", "file"])
    calibration = calibration.merge(words, on=["book", "file"], how="left")
    audited = (
        _rates(snip[snip.role == "audited"], tau, confidence)
        .merge(book_bootstrap(snip, target_fpr, book_bootstrap_samples, confidence, seed), on=["book", "file"])
        .merge(words, on=["book", "file"], how="left")
        .sort_values("contamination_rate", ascending=False, kind="stable")
        .reset_index(drop=True)
    )
    overlaps = snip.groupby(["book", "file"], sort=False).start_word.apply(
        lambda starts: overlapping_snippets(starts, snippet_words)
    )
    for frame in (audited, calibration):
        frame["overlapping_snippets"] = [int(overlaps[(b, f)]) for b, f in zip(frame.book, frame.file)]
        frame["snippets_overlap"] = frame.overlapping_snippets > 0
    audited = audited.merge(verdicts, on=["book", "file"])
    means = cal.groupby(["book", "file"], sort=False).score.mean()
    book_y = cal.groupby(["book", "file"], sort=False).role.first().eq("member").astype(int)
    book_auc = float(roc_auc_score(book_y, means)) if book_y.nunique() == 2 else None
    info = {
        "provenance": provenance(lm.identity, lm.tokenizer_hash, run.command),
        "model_identity": lm.identity,
        "model": model_record(lm),
        "inputs": [r for role, docs in groups.items() for r in document_records(docs, [role] * len(docs))],
        "model_config": asdict(lm.config),
        "method": method,
        "method_title": METHODS[method].title,
        "detector": detector.used(seed),
        "snippets_per_book": snippets,
        "snippet_words": snippet_words,
        "seed": seed,
        "context": scorer.target.query.context,
        "stride": scorer.target.query.effective_stride,
        "snippets_over_context": int((snip.n_tokens > scorer.target.query.context).sum()),
        "threshold_rule": f"target FPR {target_fpr}" if target_fpr is not None else "max snippet accuracy",
        "threshold": tau,
        "calibration_auc": verdict_info["calibration_auc"],
        "calibration_accuracy": float(((cal.score > tau).to_numpy() == y.astype(bool)).mean()),
        "calibration_tpr": verdict_info["tpr"],
        "calibration_fpr": verdict_info["fpr"],
        "confidence": confidence,
        "interval": "Wilson score",
        "book_interval": f"bootstrap over calibration books and snippets ({book_bootstrap_samples} resamples)",
        "p_value_rule": "full conformal against the calibration non-member books' rates at the book's own snippet "
        f"count (n_compared, at least {config.min_snippets})",
        "debiased_interval": "prediction interval: the book's own false-positive rate drawn like a calibration "
        "non-member book's, its snippets binomial",
        "calibration_book_auc": book_auc,
        "blind_auc": None if blind is None else blind["blind_auc"],
        "blind_kind": None if blind is None else blind["best_kind"],
        "blind_warning": None if blind is None else shift_warning(blind["blind_auc"], book_auc),
        "threshold_warning": threshold_warning(tau),
        "overlap_warning": overlap_warning(pd.concat([audited, calibration]), snippets, snippet_words),
        "beyond_blind": beyond_result,
        "verdicts": verdict_info,
        "n_books": len(groups["audited"]),
        "n_calibration_members": len(groups["member"]),
        "n_calibration_nonmembers": len(groups["non-member"]),
        "duplicates_dropped": duplicates,
        "skipped": skips.as_json(),
        "wall_seconds": round(time.time() - started, 1),
    }
    if verdict_info["calibration_problems"]:
        info["warning"] = (
            f"WARNING: the calibration ({METHODS[method].title}, AUC {info['calibration_auc']:.3f}) cannot support "
            f"a verdict: {'; '.join(verdict_info['calibration_problems'])}. Every book is inconclusive and its "
            "debiased fraction n/a."
        )
    return ContaminationReport(audited, calibration, snip, tau, info)


def _calibration_beyond_blind(groups: dict, snip: pd.DataFrame, method: str, config: BeyondBlindConfig, seed: int):
    """The calibration books' mean snippet scores (a score that needs no fitting) against a blind classifier of
    their texts, on ``config.folds`` folds (fewer when a class has fewer books), as ``methods.beyond_blind``
    reports it, and the blind baseline itself (``methods.blind.evaluate_blind``); ``({"unavailable": reason}, None)``
    when there are too few books."""
    docs = groups["member"] + groups["non-member"]
    labels = np.array([1] * len(groups["member"]) + [0] * len(groups["non-member"]))
    name = f"{method} (mean snippet score)"
    k = min(config.folds, len(groups["member"]), len(groups["non-member"]))
    if k < 2:
        return {"unavailable": "each calibration set needs at least 2 books", "model": name}, None
    means = snip[snip.role != "audited"].groupby(["book", "file"]).score.mean()
    scores = np.array([means[(d.id, d.path)] for d in docs])
    folds = chunk_folds(labels, k, seed)
    features = BlindFeatures([d.text for d in docs])
    blind = evaluate_blind(features, labels, folds, seed=seed)
    compared = beyond_blind.Candidate(name, beyond_blind.fixed_scorer(scores), scores)
    return beyond_blind.against_blind(labels, folds, features, blind, compared, config, seed), blind
