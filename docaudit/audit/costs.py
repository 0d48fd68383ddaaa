"""What a command will take, before it runs: a cost model of its steps (``--dry-run`` and the start line).

Each step is an amount of work at a rate: loading the model (seconds), the model passes (scored tokens: the main
query of every document, and each detector's extra passes over the texts it scores, e.g. PAC's copies and the
lowercased text), the meta-classifier's forests (trees: the inner search's and each fit's), and the rest of the
command (tokenizing, a detector's copies and scoring, the blind baselines, the beyond-blind refits, bootstraps,
seconds per token of its model passes, per command and variant: :func:`measured_run` measures it on every real run
as the wall time less the passes, loading and forests). Rates come from this machine when a real run measured them
recently (``docaudit.query.rates``), else from the documented ones (``docaudit.config.rules``). Statistics already
in the cache take no model pass; the estimate counts them as queried (a cold cache)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from docaudit.config import BeyondBlindConfig, DetectorConfig, MetaConfig, ModelConfig, QueryConfig
from docaudit.config.rules import (
    CHARS_PER_TOKEN,
    CONTROLS_GENERATED_PER_SECOND,
    CONTROLS_SCORED_PER_SECOND,
    CONVERT_SECONDS_PER_GB,
    GGUF_TOKENIZER_SECONDS,
    LOAD_SECONDS,
    OTHER_SECONDS_PER_TOKEN,
    QUERY_TOKENS_PER_SECOND,
    TREE_SECONDS,
)
from docaudit.query import rates
from docaudit.query.sources import embedded_conversion_pending, embedded_tokenizer_pending


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
    pass_tokens: int = 0  # of every model pass counted so far

    @property
    def seconds(self) -> float | None:
        """The whole command (None when a model pass has no known rate)."""
        if any(s.seconds is None for s in self.steps):
            return None
        return sum(s.seconds for s in self.steps)

    def add_passes(self, name: str, tokens: int) -> None:
        if tokens > 0:
            self.pass_tokens += tokens
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
        add_conversion(plan, [model])
        plan.steps.append(Step("loading the model", "once", plan.rates.load_s))
    plan.add_passes("model passes: documents", plan.tokens)
    return plan


def add_conversion(plan: Plan, models: Sequence[ModelConfig]) -> None:
    """The embedded model's first use (once), when one of ``models`` is the embedded one: its conversion for
    transformers, or the read of its tokenizer for llama.cpp, while the cache lacks it."""
    embedded = any(m.backend == "transformers" and m.model is None for m in models)
    if embedded and (size := embedded_conversion_pending()):
        per_gb = rates.measured(rates.CONVERSION_KEY, "convert_s_per_gb") or CONVERT_SECONDS_PER_GB
        plan.steps.append(Step("converting the embedded model (its first use, once)", f"{size / 1e6:.0f} MB",
                               per_gb * size / 1e9))  # fmt: skip
    if any(m.backend == "llamacpp" and m.model is None for m in models) and embedded_tokenizer_pending():
        plan.steps.append(
            Step("reading the embedded model's tokenizer (its first use, once)", "once", GGUF_TOKENIZER_SECONDS)
        )


def controls_rate(model: ModelConfig, name: str) -> tuple[float | None, bool]:
    """``controls``' ``generated_per_s`` or ``scored_per_s`` of ``model`` on this machine (recent, from the
    cache) and True, else the documented one (None for a backend without one) and False."""
    found = rates.measured(rates.model_key(model), name)
    if found is not None:
        return found, True
    documented = CONTROLS_GENERATED_PER_SECOND if name == "generated_per_s" else CONTROLS_SCORED_PER_SECOND
    return documented.get(model.backend), False


def controls_plan(cost: dict, models: dict[str, ModelConfig], loaded: Sequence[str] = ()) -> Plan:
    """The estimated steps of ``controls`` (``cost``: ``audit.synthetic_controls.planned_cost``; ``models``: the
    ``target``, ``generator`` and optional ``reference``; ``loaded``: the roles given already loaded): the embedded
    model's first conversion while pending, loading each model, the generated tokens at the generator's measured
    generated tokens per second, each scoring model's tokens at its scored tokens per second, and the rest of the
    command at its measured seconds per token of those passes. ``Plan.rates.measured`` names what this machine
    measured (``generation``, ``scoring``, ``load``, ``rest``)."""
    target, generator = models["target"], models["generator"]
    scorers = [m for m in (target, models.get("reference")) if m is not None]
    distinct = {role: m for role, m in models.items() if m is not None and (role == "target" or m != target)}
    measured = []
    plan = Plan(cost["texts"], cost["tokens_generated"] + cost["tokens_scored"], 0, 0, rates_for(target))
    to_load = [m for role, m in distinct.items() if role not in loaded]
    add_conversion(plan, to_load)
    for role, m in distinct.items():
        if role not in loaded:
            here = rates_for(m)
            measured += ["load"] * ("load" in here.measured)
            plan.steps.append(Step(f"loading the {role}", "once", here.load_s))
    generated, known = controls_rate(generator, "generated_per_s")
    measured += ["generation"] * known
    plan.steps.append(
        Step(
            "generation (the generator's synthetic suffixes)",
            f"~{cost['tokens_generated']:,} tokens" + (f" at {generated:.0f} tok/s" if generated else ""),
            cost["tokens_generated"] / generated if generated else None,
        )
    )
    per_model = cost["tokens_scored"] // max(len(scorers), 1)
    for role, m in zip(("target", "reference"), scorers):
        scored, known = controls_rate(m, "scored_per_s")
        measured += ["scoring"] * known
        plan.steps.append(
            Step(
                f"scoring by the {role} (context, prefix and suffix)",
                f"~{per_model:,} tokens" + (f" at {scored:.0f} tok/s" if scored else ""),
                per_model / scored if scored else None,
            )
        )
    plan.pass_tokens = plan.tokens
    rate, known = other_rate("controls")
    measured += ["rest"] * known
    add_other(plan, "controls")
    plan.rates = replace(plan.rates, measured=tuple(dict.fromkeys(measured)))
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


def add_meta(plan: Plan, meta: MetaConfig, folds: int, final_fit: bool, beyond: bool = False) -> None:
    """The meta-classifier's forests: one fit per fold (the inner search included) and, with ``final_fit``
    (``train``), one on every document; with ``beyond``, the beyond-blind comparison's refits (inner folds of every
    outer fold, with the search's smaller forests: ``methods.beyond_blind.meta_scorer``)."""
    training = plan.documents * (folds - 1) // max(folds, 1)  # documents of a training fold
    trees = meta.trees(folds, training) + (meta.trees(1, plan.documents) if final_fit else 0)
    fits = meta.forest_fits(folds + final_fit)
    if beyond:
        inner = BeyondBlindConfig().inner_folds
        refits = folds * inner
        trees += refits * meta.search_trees(training * (inner - 1) // inner)
        fits += refits
    plan.add_trees("meta-classifier (model selection and fits)", trees, fits)


def other_rate(variant: str) -> tuple[float, bool]:
    """Seconds per model-pass token of a command's work beside its passes, loading and forests (``variant``: the
    command and its parts, :attr:`Shape.variant`), and whether this machine measured it (else documented)."""
    found = rates.measured(rates.OTHER_KEY, f"{variant} s/token")
    if found is not None:
        return found, True
    command = variant.split("+")[0]
    return OTHER_SECONDS_PER_TOKEN.get(variant, OTHER_SECONDS_PER_TOKEN.get(command, 0.0)), False


def add_other(plan: Plan, variant: str) -> None:
    """The rest of the command, in proportion to the tokens of its model passes (every pass step so far)."""
    rate, _ = other_rate(variant)
    if plan.pass_tokens and rate:
        amount = f"{rate * 1e3:.2g} ms per token of model passes"
        plan.steps.append(
            Step("the rest (tokenizing, scoring, blind baselines, bootstraps)", amount, plan.pass_tokens * rate)
        )


def variant(command: str, meta: bool = False, blind: bool = False, beyond: bool = False) -> str:
    """The command and the parts beside the passes that change its rest per token (``evaluate+meta+blind``)."""
    return "+".join([command] + [name for name, on in (("meta", meta), ("blind", blind), ("beyond", beyond)) if on])


def measured_run(command: str, parts: Callable[[dict], tuple[bool, bool, bool]] | None = None) -> Callable:
    """Decorate a command's audit function to measure its work beside the model passes, loading and forests
    (``rates.clock``), kept as its variant's seconds per pass token for the next estimate; ``parts``: from the
    call's arguments by name, whether the meta-classifier, the blind baselines and the beyond-blind comparison
    run."""

    def decorate(run: Callable) -> Callable:
        signature = inspect.signature(run)

        @functools.wraps(run)
        def timed(*args, **kwargs):
            if parts is None:
                name = command
            else:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                name = variant(command, *parts(bound.arguments))
            with measuring(name):
                return run(*args, **kwargs)

        return timed

    return decorate


@contextlib.contextmanager
def measuring(variant: str) -> Iterator[None]:
    """Measure the block's work beside its model passes, loading and forests (``rates.clock``), kept as
    ``variant``'s seconds per pass token for the next estimate (a command whose outputs are written outside its
    audit function measures both here, so the writing is counted)."""
    with rates.clock() as spent:
        start = time.perf_counter()
        yield
        wall = time.perf_counter() - start
    rates.record_other(variant, spent["tokens"], wall - spent["passes"] - spent["load"] - spent["forests"])


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

    @property
    def variant(self) -> str:
        """The command and its parts that change its rest per token (:func:`variant`)."""
        return variant(self.command, self.meta is not None, self.blind, self.beyond)


def command_plan(shape: Shape, sizes: Sequence[int], query: QueryConfig, model: ModelConfig, load: bool = True) -> Plan:
    """The estimated steps of a command over documents of ``sizes`` bytes each."""
    plan = query_plan(sizes, query, model, load)
    if shape.command == "evaluate":
        sequences = sequence_tokens(plan.doc_tokens, query, shape.n_sequences)
        add_extra_passes(plan, shape.methods, shape.detector, sequences)
    elif shape.command in ("score", "sequence", "report", "dataset-test"):
        add_extra_passes(plan, shape.methods, shape.detector, plan.tokens)
    add_other(plan, shape.variant)
    if shape.meta is not None:
        add_meta(plan, shape.meta, shape.folds, final_fit=shape.command == "train", beyond=shape.beyond)
    return plan


def extract_plan(
    sizes: Sequence[int], example_tokens: int, stride: int, model: ModelConfig, first: int | None = None
) -> Plan:
    """``extract`` over texts of ``sizes`` bytes each: loading the model, then every example of ``example_tokens``
    tokens (a BOS counted before each) every ``stride`` tokens, at this machine's measured extraction rate for the
    model, else the documented one (``config.rules.EXTRACT_TOKENS_PER_SECOND``); ``first``: only the first that many
    tokens of each text."""
    from docaudit.config.rules import EXTRACT_TOKENS_PER_SECOND

    measured = rates.measured(rates.model_key(model), "extract_per_s")
    here = rates_for(model)
    known = tuple(m for m in here.measured if m != "query") + (("query",) if measured else ())
    here = replace(here, tokens_per_s=measured or EXTRACT_TOKENS_PER_SECOND.get(model.backend), measured=known)
    tokens = [min(math.ceil(b / here.bytes_per_token), first or math.inf) for b in sizes]
    examples = sum(max(0, (n - example_tokens) // stride + 1) for n in tokens)
    plan = Plan(len(tokens), sum(tokens), examples, example_tokens + 1, here, doc_tokens=tokens)
    add_conversion(plan, [model])
    plan.steps.append(Step("loading the model", "once", here.load_s))
    plan.add_passes("model passes: every example", examples * (example_tokens + 1))
    return plan
