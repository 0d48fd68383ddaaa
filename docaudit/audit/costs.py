"""What a command will take, before it runs: a cost model of its steps (``--dry-run`` and the start line).

Each step is an amount of work at a rate: loading the model (seconds), the model passes (scored tokens: the main
query of every document, and each detector's extra passes over the texts it scores, e.g. PAC's copies and the
lowercased text), and the meta-classifier's forests (trees: the inner search's and each fit's, the beyond-blind
comparison's refits, the blind baselines'). Rates come from this machine when a real run measured them recently
(``docaudit.query.rates``), else from the documented ones (``docaudit.config.rules``). Statistics already in the
cache take no model pass; the estimate counts them as queried (a cold cache)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from docaudit.config import BeyondBlindConfig, DetectorConfig, MetaConfig, ModelConfig, QueryConfig
from docaudit.config.rules import CHARS_PER_TOKEN, LOAD_SECONDS, QUERY_TOKENS_PER_SECOND, TREE_SECONDS
from docaudit.query import rates

BLIND_TREES = 300  # the blind baseline's "dates" forest (``methods.blind.make_pipeline``)


@dataclass(frozen=True)
class Rates:
    """Tokens per second of model passes, seconds to load the model, seconds per forest tree, bytes of text per
    token of the model's tokenizer; ``measured``: which of them come from this machine (the others are the
    documented ones)."""

    tokens_per_s: float | None
    load_s: float
    tree_s: float
    bytes_per_token: float = CHARS_PER_TOKEN
    measured: tuple[str, ...] = ()


def rates_for(model: ModelConfig) -> Rates:
    """The rates of ``model`` on this machine: recent measurements from the cache, else the documented ones."""
    key = rates.model_key(model)
    tokens = rates.measured(key, "tokens_per_s")
    load = rates.measured(key, "load_s")
    tree = rates.measured(rates.FOREST_KEY, "tree_s")
    size = rates.measured(key, "bytes_per_token")
    found = (("query", tokens), ("load", load), ("forests", tree), ("tokenizer", size))
    return Rates(
        tokens if tokens is not None else QUERY_TOKENS_PER_SECOND.get(model.backend),
        load if load is not None else LOAD_SECONDS.get(model.backend, 0.0),
        tree if tree is not None else TREE_SECONDS,
        size if size is not None else CHARS_PER_TOKEN,
        tuple(n for n, v in found if v is not None),
    )


@dataclass(frozen=True)
class Step:
    """One step of a command: what it is, its amount in words, its estimated seconds (None: no rate known)."""

    name: str
    amount: str
    seconds: float | None


@dataclass
class Plan:
    """A command's estimated steps; ``documents``, ``tokens`` and ``windows`` of the main query."""

    documents: int
    tokens: int
    windows: int
    context: int
    rates: Rates
    steps: list[Step] = field(default_factory=list)
    doc_tokens: list[int] = field(default_factory=list)

    @property
    def seconds(self) -> float | None:
        """The whole command (None when a model pass has no known rate)."""
        if any(s.seconds is None for s in self.steps):
            return None
        return sum(s.seconds for s in self.steps)

    def add_passes(self, name: str, tokens: int) -> None:
        if tokens > 0:
            rate = self.rates.tokens_per_s
            self.steps.append(Step(name, f"~{tokens:,} tokens", None if rate is None else tokens / rate))

    def add_trees(self, name: str, trees: int, fits: int) -> None:
        if trees > 0:
            self.steps.append(Step(name, f"{fits:,} forest fits, {trees:,} trees", trees * self.rates.tree_s))


def windows_of(n: int, context: int, stride: int) -> int:
    """Windows of ``context`` tokens at ``stride`` over ``n`` tokens."""
    return 1 if n <= context else math.ceil((n - context) / stride) + 1


def query_plan(sizes: Sequence[int], query: QueryConfig, model: ModelConfig, load: bool = True) -> Plan:
    """Loading the model (``load``) and the main query of documents of ``sizes`` bytes each (in tokens at the
    tokenizer's bytes per token; at most ``query.max_tokens``)."""
    rates_here = rates_for(model)
    tokens = [math.ceil(b / rates_here.bytes_per_token) for b in sizes]
    stride = query.stride or query.context - 1
    queried = [n if query.max_tokens is None else min(n, query.max_tokens) for n in tokens]
    windows = sum(windows_of(n, query.context, stride) for n in queried)
    plan = Plan(len(queried), sum(queried), windows, query.context, rates_here, doc_tokens=queried)
    if load:
        plan.steps.append(Step("loading the model", "once", plan.rates.load_s))
    plan.add_passes("model passes: documents", plan.tokens)
    return plan


def pass_copies(methods: Sequence[str], detector: DetectorConfig) -> dict[str, int]:
    """The extra passes the ``methods`` run, and how many copies of each text each pass queries."""
    from docaudit.methods.detectors.registry import METHODS

    copies = {"pac": detector.pac_copies, "neighbor": detector.neighbors}
    names = {p for m in methods if m in METHODS for p in METHODS[m].passes}
    return {p: copies.get(p, 1) for p in sorted(names)}


def add_extra_passes(plan: Plan, methods: Sequence[str], detector: DetectorConfig, text_tokens: int) -> None:
    """The detectors' extra passes over texts of ``text_tokens`` tokens in all (the documents, their sampled
    sequences or the snippets, as the command scores them)."""
    for name, n in pass_copies(methods, detector).items():
        plan.add_passes(f"model passes: {name} ({n} per text)" if n > 1 else f"model passes: {name}", n * text_tokens)


def sequence_tokens(tokens: Sequence[int], query: QueryConfig, n_sequences: int) -> int:
    """Tokens of the sequences ``evaluate`` samples from documents of ``tokens`` queried tokens each (at most
    ``n_sequences`` windows of each)."""
    stride = query.stride or query.context - 1
    return sum(min(n_sequences, windows_of(n, query.context, stride)) * min(n, query.context) for n in tokens)


def add_meta(plan: Plan, meta: MetaConfig, folds: int, final_fit: bool) -> None:
    """The meta-classifier's forests: one fit per fold (the inner search included) and, with ``final_fit``
    (``train``), one on every document."""
    n = folds + final_fit
    plan.add_trees("meta-classifier (model selection and fits)", meta.trees(n), meta.forest_fits(n))


def add_blind(plan: Plan, folds: int, beyond: BeyondBlindConfig | None, meta: MetaConfig | None) -> None:
    """The blind baselines on every fold and, with ``beyond``, the beyond-blind comparison's refits on its inner
    folds (of the blind baseline and, with ``meta``, of the chosen meta-classifier)."""
    inner = 0 if beyond is None else beyond.inner_folds
    plan.add_trees("blind baselines", folds * (1 + inner) * BLIND_TREES, folds * (1 + inner))
    if beyond is not None and meta is not None:
        plan.add_trees("beyond-blind refits", folds * inner * meta.n_estimators, folds * inner)


@dataclass(frozen=True)
class Shape:
    """What a command runs beside its main query: its name, the detectors (``methods``) with their settings, the
    meta-classifier (None: not run) on ``folds`` folds, the sequences sampled per document (``evaluate``), the blind
    baselines and the beyond-blind comparison."""

    command: str
    methods: tuple[str, ...] = ()
    detector: DetectorConfig = DetectorConfig()
    meta: MetaConfig | None = None
    folds: int = 0
    n_sequences: int = 40
    blind: bool = False
    beyond: bool = False


def command_plan(shape: Shape, sizes: Sequence[int], query: QueryConfig, model: ModelConfig, load: bool = True) -> Plan:
    """The estimated steps of a command over documents of ``sizes`` bytes each."""
    plan = query_plan(sizes, query, model, load)
    if shape.command == "evaluate":
        sequences = sequence_tokens(plan.doc_tokens, query, shape.n_sequences)
        add_extra_passes(plan, shape.methods, shape.detector, sequences)
    elif shape.command in ("score", "sequence", "report", "dataset-test"):
        add_extra_passes(plan, shape.methods, shape.detector, plan.tokens)
    if shape.meta is not None:
        add_meta(plan, shape.meta, shape.folds, final_fit=shape.command == "train")
    if shape.blind:
        add_blind(plan, shape.folds, BeyondBlindConfig() if shape.beyond else None, shape.meta)
    return plan
