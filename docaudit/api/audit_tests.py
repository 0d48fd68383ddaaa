"""The tests ``docaudit audit`` can plan, as a registry: each says when it cannot give a valid answer for what the
user gave (and what would let it run), builds its own command's request, estimates its time from that command's
``--dry-run`` estimate, and runs it, giving one outcome per book. A new test is one more :func:`register_test`
call (the order of registration is the order the budget is spent in)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from docaudit.api.audit_request import AuditRequest
from docaudit.config import DEFAULT_CLASSIFIER, LocalizeConfig, ModelConfig
from docaudit.config.power import EMBEDDED
from docaudit.inference.verdicts import INCONCLUSIVE


@dataclass
class Outcome:
    """One test's answer for one book: its own ``verdict`` and ``reason``, the ``p_value`` the statement counts
    (None: the test answered "inconclusive", or gave no p-value), and the numbers shown beside it."""

    verdict: str
    reason: str | None
    p_value: float | None
    numbers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class AuditTest:
    """One plannable test: ``name``; ``what`` it asks in words; ``blocked`` (why it cannot give a valid answer
    here, naming what would let it run; None: it can); ``request`` (its command's request); ``seconds`` (the
    estimate of that request, None when unknown); ``run`` (the request run, an :class:`Outcome` per book path, plus
    the command's JSON body); ``setting`` (what decides its published power, ``config.power``); ``counted``: whether
    its p-value enters the statement per book (False: figures shown beside the statement, no p-value, no verdict)."""

    name: str
    what: str
    blocked: Callable[[AuditRequest], str | None]
    request: Callable[[AuditRequest], object]
    seconds: Callable[[object], float | None]
    run: Callable[[object], tuple[dict[str, Outcome], dict]]
    setting: Callable[[AuditRequest], dict[str, str]] = lambda r: {}
    counted: bool = True


TESTS: dict[str, AuditTest] = {}


def register_test(test: AuditTest) -> AuditTest:
    """Add ``test`` to the tests ``audit`` plans, after those already there."""
    TESTS[test.name] = test
    return test


def model_key(model: ModelConfig) -> str | None:
    """The key of ``model`` among the published measurements (``config.power``): the embedded Gemma run in this
    process, else None (no measurement applies)."""
    return EMBEDDED if model.model is None and model.backend != "openai" else None


def target_kind(r: AuditRequest) -> str:
    """What the target is, from its configuration alone: ``embedded``, ``gguf``, ``weights`` (a folder or hub id),
    ``server`` (prompt log-probabilities) or ``chat`` (a server that only writes text)."""
    m = r.model
    if r.chat_only:
        return "chat"
    if m.backend == "openai" or (m.model or "").startswith(("http://", "https://")):
        return "server"
    if m.model is None:
        return "embedded"
    return "gguf" if m.model.endswith(".gguf") else "weights"


def key(path: object) -> str:
    """A book's key across the tests' rows: its path as read, made absolute."""
    return os.path.abspath(os.fspath(path))


def _outcome(row: dict, numbers: tuple[str, ...]) -> Outcome:
    verdict = row["verdict"]
    p = row.get("p_value")
    return Outcome(verdict, row.get("reason"), None if verdict == INCONCLUSIVE else p, {n: row.get(n) for n in numbers})


def _plan_seconds(estimate) -> float | None:
    plan = estimate.plan()
    return None if plan is None else plan.seconds


def _estimated(request, pick: Callable = _plan_seconds) -> float | None:
    from docaudit.api.preflight import estimate

    return sum_or_none(pick(e) for e in estimate(request))


def sum_or_none(values: Iterable[float | None]) -> float | None:
    """The sum, or None when one of ``values`` is unknown."""
    values = list(values)
    return None if any(v is None for v in values) else float(sum(values))


# ---- controls: synthetic controls written from the book itself ----------------------------------------------


def _controls_blocked(r: AuditRequest) -> str | None:
    if target_kind(r) == "chat":
        return "needs the target to score given text; a chat-only server cannot (probe can)"
    if r.library is None and target_kind(r) != "embedded":
        return "no null library for this model (--null-library DIR: texts it never saw, like the book)"
    return None


def _controls_request(r: AuditRequest):
    from docaudit.api.books import ControlsRequest, run_like
    from docaudit.config import ControlsConfig

    config = ControlsConfig.preset("fast" if r.library is None else "default", alpha=r.config.alpha)
    library = None if r.library is None else list(r.library)
    return ControlsRequest(list(r.books), r.model, run_like(r.model, None), None, library, config, r.reading, r.run)


def _controls_run(request) -> tuple[dict[str, Outcome], dict]:
    from docaudit.api.books import synthetic_controls

    result = synthetic_controls(request)
    numbers = ("contrast", "contrast_ci_low", "contrast_ci_high", "placebo", "passages", "library_eligible",
               "smallest_p", "p_value_blind")  # fmt: skip
    found = {key(row["file"]): _outcome(row, numbers) for row in result.rows}
    body = {"null": result.controls.get("null"), "settings": result.controls.get("settings")}
    return found, {**body, "model": result.envelope.get("model")}


register_test(
    AuditTest(
        "controls",
        "the book's real continuations against synthetic ones a generator writes for its own prefixes",
        _controls_blocked,
        _controls_request,
        lambda q: _estimated(q, lambda e: e.controls.seconds),
        _controls_run,
        lambda r: {"generator": "target" if _controls_request(r).generator == r.model else "base"},
    )
)


# ---- predict: the saved meta-classifier ------------------------------------------------------------------------


def _predict_classifier(r: AuditRequest) -> Path | None:
    if r.classifier is not None:
        return Path(r.classifier)
    return DEFAULT_CLASSIFIER if target_kind(r) == "embedded" else None


def _predict_blocked(r: AuditRequest) -> str | None:
    if target_kind(r) == "chat":
        return "needs the model's log-probabilities, which a chat-only server does not give"
    if _predict_classifier(r) is None:
        return "no classifier for this model (--classifier DIR: one trained on it with docaudit train)"
    auc = _card_auc(_predict_classifier(r))
    if auc is not None and auc[1] <= 0.5 <= auc[2]:
        return (
            f"the classifier's own AUC {auc[0]:.2f} (95% {auc[1]:.2f}-{auc[2]:.2f}) includes 0.5, so it answers "
            "inconclusive for every book (--classifier DIR: one trained on this model that separates its sets)"
        )
    return None


def _card_auc(classifier: Path) -> tuple[float, float, float] | None:
    """The classifier's own AUC and 95% interval from its card, known before any book is judged (None when the card
    cannot be read: predict itself says why)."""
    import json

    from docaudit.audit.card_model import classifier_auc
    from docaudit.untrusted import read_untrusted_text

    try:
        return classifier_auc(json.loads(read_untrusted_text(Path(classifier) / "card.json", "card")))
    except Exception:  # any unreadable card: predict reports it when it runs
        return None


def _predict_request(r: AuditRequest):
    from docaudit.api.classifier import PredictRequest

    return PredictRequest(list(r.books), _predict_classifier(r), r.model, alpha=r.config.alpha, reading=r.reading,
                          run=r.run)  # fmt: skip


def _predict_run(request) -> tuple[dict[str, Outcome], dict]:
    from docaudit.api.classifier import predict

    result = predict(request)
    numbers = ("membership_score", "p_value_blind", "classifier_auc", "n_known_nonmembers", "smallest_p")
    found = {key(row["file"]): _outcome(row, numbers) for row in result.rows if "verdict" in row}
    settings = {"classifier": str(request.classifier), "alpha": request.alpha}
    return found, {"rows": result.rows, "settings": settings, "model": result.envelope.get("model")}


register_test(
    AuditTest(
        "predict",
        "a meta-classifier trained on known members and non-members of this model",
        _predict_blocked,
        _predict_request,
        _estimated,
        _predict_run,
    )
)


# ---- map: which chapters score like trained text ---------------------------------------------------------------


def _map_blocked(r: AuditRequest) -> str | None:
    from docaudit.api.preflight import unreachable

    if target_kind(r) == "chat":
        return "needs the model's log-probabilities, which a chat-only server does not give"
    if r.nonmembers is None:
        return "no known non-members to calibrate the chapters against (--nonmembers DIR)"
    return unreachable(_map_request(r))


def _map_request(r: AuditRequest):
    from docaudit.api.books import MapRequest
    from docaudit.audit.specs import MapSpec

    method = "loss" if target_kind(r) == "server" else LocalizeConfig.method  # a server gives no full distribution
    spec = MapSpec(config=LocalizeConfig(method=method), alpha=r.config.alpha)
    return MapRequest(list(r.books), list(r.nonmembers), model=r.model, spec=spec, reading=r.reading, run=r.run)


def _map_run(request) -> tuple[dict[str, Outcome], dict]:
    """Per book the Bonferroni p-value over its segments (``m · min p``, valid whatever their dependence): the map's
    own verdicts are per segment, with Benjamini–Hochberg."""
    from docaudit.api.books import map_books
    from docaudit.inference.verdicts import EVIDENCE, NO_EVIDENCE

    outcome = map_books(request)
    found = {}
    for book in outcome.map.books:
        segments = [row for row in outcome.rows if row.get("file") == book["file"]]
        ps = [row["p_value"] for row in segments if row.get("p_value") is not None and row["verdict"] != INCONCLUSIVE]
        flagged = sum(row["verdict"] == EVIDENCE for row in segments)
        numbers = {"segments": len(segments), "flagged": flagged, "segmented_by": book.get("segmented_by")}
        if not ps:
            found[key(book["file"])] = Outcome(INCONCLUSIVE, "no segment could be judged", None, numbers)
            continue
        p = min(1.0, len(segments) * min(ps))
        verdict = EVIDENCE if flagged else NO_EVIDENCE
        found[key(book["file"])] = Outcome(verdict, None, p, numbers)
    spec = request.spec
    settings = {"method": spec.config.method, "segment_words": spec.config.segment_words, "alpha": spec.alpha}
    return found, {"segments": outcome.envelope["rows"], "settings": settings, "model": outcome.envelope.get("model")}


register_test(
    AuditTest(
        "map",
        "each chapter against the same place in known non-members' chapters",
        _map_blocked,
        _map_request,
        _estimated,
        _map_run,
        lambda r: {"method": _map_request(r).spec.config.method},
    )
)


# ---- probe: what the model writes about the book's passages ----------------------------------------------------


def _probe_blocked(r: AuditRequest) -> str | None:
    if r.library is None:
        return "no null library of never-seen texts to probe the same way (--null-library DIR)"
    return None


def _probe_request(r: AuditRequest):
    from docaudit.api.probes import ProbeRequest
    from docaudit.config import ProbeConfig

    _require_server(r)
    return ProbeRequest(list(r.books), r.model, list(r.library), ProbeConfig(alpha=r.config.alpha),
                        reading=r.reading, run=r.run)  # fmt: skip


def _require_server(r: AuditRequest) -> None:
    """Refuse a chat target given without its server."""
    model = r.model
    if target_kind(r) == "chat" and not (model.api_base or (model.model or "").startswith(("http://", "https://"))):
        from docaudit.errors import DocauditError

        raise DocauditError("--chat-only needs the server: --api-base URL --api-model NAME (or --model URL#NAME)")


def _probe_run(request) -> tuple[dict[str, Outcome], dict]:
    from docaudit.api.probes import probe

    result = probe(request)
    numbers = ("statistic", "passages", "compared_at", "smallest_p", "p_value_blind", "requests")
    found = {key(row["file"]): _outcome(row, numbers) for row in result.rows}
    body = {"null": result.probe.get("null"), "settings": result.probe.get("settings")}
    return found, {**body, "model": result.envelope.get("model")}


register_test(
    AuditTest(
        "probe",
        "what the model writes about the book's passages against what it writes about never-seen texts",
        _probe_blocked,
        _probe_request,
        lambda q: _estimated(q, lambda e: e.cost["seconds"]),
        _probe_run,
        lambda r: {"probe": "ngram"},
    )
)


# ---- traps: copyright traps planted before publishing ----------------------------------------------------------


def _traps_blocked(r: AuditRequest) -> str | None:
    if r.traps is None:
        return "no trap registry (--traps REGISTRY, written by docaudit traps make before the book was published)"
    if target_kind(r) == "chat":
        return "needs the model's log-probabilities, which a chat-only server does not give"
    from docaudit.api.preflight import document_files
    from docaudit.corpus.traps import read_registry

    names = {name for d in read_registry(r.traps).documents for name in _names(d)}
    if not any(Path(f).stem in names for f in document_files(r.books) or []):
        return "the trap registry holds none of these books (by file name: the trapped copy's, or its source's)"
    return None


def _names(trapped) -> set[str]:
    """The names a registry's document answers to: its id, its trapped copy's and its source's file stems."""
    return {trapped.id, Path(trapped.output).stem, Path(trapped.source).stem}


def _traps_request(r: AuditRequest):
    from docaudit.api.lab import TrapsDetectRequest

    return TrapsDetectRequest(Path(r.traps), r.model, alpha=r.config.alpha, run=r.run)


def _traps_seconds(request) -> float | None:
    """The traps' and controls' sequences scored once, at this machine's rates (``audit.costs.query_plan``)."""
    from docaudit.audit.costs import query_plan
    from docaudit.config import QueryConfig
    from docaudit.corpus.traps import read_registry

    registry = read_registry(request.registry)
    sizes = [len(s.text.encode()) for d in registry.documents for s in (*d.traps, *d.controls)]
    model = request.model if isinstance(request.model, ModelConfig) else ModelConfig()
    return query_plan(sizes, QueryConfig(), model).seconds


def _traps_run(request) -> tuple[dict[str, Outcome], dict]:
    """Per book, the registry's document of the same name (``_names``: the book's file stem)."""
    from docaudit.api.lab import traps_detect
    from docaudit.corpus.traps import read_registry

    registry = read_registry(request.registry)
    detection = traps_detect(request).detection
    rows = {row["document"]: row for row in detection.rows}
    numbers = ("auc_loss", "auc_minkpp", "n_traps", "n_controls")
    found = {}
    for d in registry.documents:
        if d.id in rows:
            found.update(dict.fromkeys(_names(d), _outcome(rows[d.id], numbers)))
    settings = {"registry": str(request.registry), "alpha": request.alpha}
    return found, {"documents": detection.rows, "settings": settings, "model": detection.model}


register_test(
    AuditTest(
        "traps",
        "the book's planted traps against never-published controls",
        _traps_blocked,
        _traps_request,
        _traps_seconds,
        _traps_run,
    )
)


# ---- extract: how much of the book the model writes back (figures beside the statement, not counted) -------------


def _extract_mode(r: AuditRequest) -> str:
    """``pz`` where the target gives log-probabilities (a model here, or a server echoing its prompt's), else
    ``continuation`` (a model that only writes, or a server searched with ``logit_bias``)."""
    if target_kind(r) == "chat" or (target_kind(r) == "server" and r.model.api_logprobs == "logit_bias"):
        return "continuation"
    return "pz"


def _extract_request(r: AuditRequest):
    from docaudit.api.extract import ExtractRequest
    from docaudit.config import ExtractConfig

    _require_server(r)
    library = None if r.library is None else list(r.library)
    config = ExtractConfig(first_tokens=r.config.extract_tokens, mode=_extract_mode(r))
    return ExtractRequest(list(r.books), r.model, library, config, r.reading, r.run)


def _extract_seconds(request) -> float | None:
    from docaudit.api.extract import planned

    return planned(request)["seconds"]


def _extract_run(request) -> tuple[dict[str, Outcome], dict]:
    """Per book what the model writes back beside the never-seen texts' (descriptive: no p-value, no verdict of its
    own): the extractable shares (p_z), or the passages continued with a long verbatim run (by continuation, also
    where a server turns out to give no prompt log-probabilities), and up to three of its passages."""
    from docaudit.api.extract import extract_books
    from docaudit.query.extraction import NoPromptLogprobs

    try:
        result = extract_books(request)
    except NoPromptLogprobs:  # a server found to give no prompt log-probabilities: what it writes back instead
        request = replace(request, config=replace(request.config, mode="continuation"))
        result = extract_books(request)
    found = {}
    if request.config.mode == "continuation":
        for b in result.books:
            numbers = {"mode": "continuation", "long_match_words": request.continuation.long_match_words}
            numbers |= {k: b[k] for k in CONTINUATION_FIGURES} | {"passages_continued": b["passages"]}
            numbers |= {"baseline": b["baseline"], "passages": b["quoted"][:3]}
            found[key(b["file"])] = Outcome(INCONCLUSIVE, None, None, numbers)
        body = {"settings": request.config.used(), "continuation": result.body["continuation"]}
        return found, {**body, "model": result.envelope.get("model")}
    for b in result.books:
        numbers = {
            "mode": "pz",
            "first_tokens": b.tokens,
            "n": request.config.n,
            "p": request.config.p,
            "extractable_share": b.extractable_share,
            "greedy_share": b.greedy_share,
            "longest_run_tokens": b.longest_run_tokens,
            "max_pz": b.max_pz,
            "baseline": b.baseline,
            "passages": b.passages[:3],
        }
        found[key(b.file)] = Outcome(INCONCLUSIVE, None, None, numbers)
    return found, {"settings": request.config.used(), "model": result.envelope.get("model")}


CONTINUATION_FIGURES = ("long_matches", "long_match_share", "longest_match_words", "mean_recall")


register_test(
    AuditTest(
        "extract",
        "how much of the book's opening the model writes back verbatim (Cooper et al. 2025; by continuation where the "
        "model only writes, Ahmed et al. 2026), beside never-seen texts",
        lambda r: None,
        _extract_request,
        _extract_seconds,
        _extract_run,
        lambda r: {"mode": _extract_mode(r)},
        counted=False,
    )
)
