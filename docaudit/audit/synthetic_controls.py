"""The paired synthetic-control test: was this book in the target's training data, judged against suffixes a
generator wrote for the book's own prefixes (post-hoc dataset inference, Zhao, Maini, Boenisch & Dziedzic, ICML
2025, ``sprintml/PostHocDatasetInference``, adapted to one book; docs/methods.md).

Per book: passages across the whole book (context, prefix, real suffix); ``samples`` synthetic suffixes per
prefix from the generator (cached by book, generator and settings, reused across targets); the target scores every
suffix after the same context in bits per byte; the per-passage contrast real − mean synthetic (minus the same
contrast under a reference model that cannot have seen the book, when one is given); the book's mean contrast with
an interval that holds when neighbouring passages depend on each other. The p-value is the book's rank among a
null library of never-seen texts treated the same way, at matched geometry: every text's passages lie one in each
consecutive stretch of ``stretch_tokens``, and each library text long enough to hold the book's layout is compared
through as many consecutive passages as the book has (``inference.matched``); with a
reference model alone the book is "inconclusive" (measured: that null is not valid).
A placebo (a synthetic suffix in the real one's
place) and, with both a reference and a library, the reference's own contrast outside the library's range turn the
verdict "inconclusive" with the reason."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from docaudit.audit.library_check import library_check, profile_of
from docaudit.config import ControlsConfig
from docaudit.corpus.segments import stretch_starts
from docaudit.errors import DocauditError
from docaudit.inference.controls import BlockMean, block_mean, contrasts, dependent_interval
from docaudit.inference.matched import matched_rank
from docaudit.inference.verdicts import Reason, nonmembers_needed, run_verdicts
from docaudit.io import atomic_write_text
from docaudit.query import rates
from docaudit.query.cache import cache_root
from docaudit.query.cache_entries import FOLDERS
from docaudit.query.conditional import bits_per_byte, scored_tokens
from docaudit.query.generate import continuation_texts
from docaudit.query.loaded import LoadedModel
from docaudit.run import RunContext
from docaudit.seeds import stream
from docaudit.untrusted import load_untrusted_json

NULL_WORDS = (
    "the book's contrast is exchangeable with those of never-seen library texts (what it tests: whether the target "
    "prefers this book's real continuations over the generator's more than it does for texts it never saw; a book "
    "unlike the library's texts in kind or era can differ without having been trained on)"
)

CACHE_FORMAT = 1
NO_LIBRARY = (
    "no null library: a reference model alone gives no valid null (under a tiny target that never saw the books, "
    'its t-test of the contrast against 0 fired for 24% of them at level 0.05; docs/methods.md, "Paired synthetic '
    'controls"); give --null-library DIR'
)


@dataclass(frozen=True)
class Passage:
    """One passage of a book: its start (in generator tokens), context, prefix, real suffix and synthetic ones."""

    start: int
    context: str
    prefix: str
    real: str
    synthetic: tuple[str, ...]


@dataclass
class BookControls:
    """One text's test: its length in generator tokens (``tokens``), its passage count (one per stretch of
    ``stretch_tokens`` it holds, up to ``passages``), its statistic (``contrast``), the placebo's, the target's and the
    reference's own mean contrasts, its per-passage contrasts in book order (``deltas``, the statistic's, net of the
    reference when one is given) and the 95% interval of its expected contrast, its p-value with the passages and
    library texts it was ranked at (``library_texts``, the library texts long enough to hold its layout, of the
    ``library_eligible`` other than itself), its model-free profile and blind p-value among the library's
    (``audit.library_check``), the reasons that make it inconclusive, and its cost."""

    id: str
    path: str
    sha256: str
    passages: int
    tokens: int | None = None
    contrast: BlockMean | None = None
    placebo: BlockMean | None = None
    target_contrast: float | None = None
    reference_contrast: float | None = None
    p_value: float | None = None
    compared_passages: int | None = None
    library_texts: int | None = None
    library_eligible: int | None = None
    smallest_p: float | None = None
    p_value_blind: float | None = None
    profile: list[float] | None = None
    deltas: list[float] = field(default_factory=list)
    interval: tuple[float, float] | None = None
    reasons: list = field(default_factory=list)
    cost: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        out = asdict(self)
        out.pop("profile")
        for key in ("contrast", "placebo"):
            block = getattr(self, key)
            out[key] = None if block is None else {"mean": block.mean, "se": block.se, "df": block.df}
        out["reasons"] = [getattr(r, "text", r) for r in self.reasons]
        return out


def passage_starts(n_tokens: int, config: ControlsConfig, rng: np.random.Generator) -> list[int]:
    """Starts of non-overlapping passages, one at random in each of up to ``config.passages`` consecutive stretches
    of ``config.stretch_tokens`` from a random offset (fewer when the text is short): the layout of every text."""
    return stretch_starts(n_tokens, config.passage_tokens, config.stretch_tokens, config.passages, rng)


def _book_seed(seed: int, sha256: str) -> int:
    return int(hashlib.sha256(f"{seed}:{sha256}".encode()).hexdigest()[:8], 16)


def passages_key(sha256: str, generator: LoadedModel, config: ControlsConfig, seed: int) -> str:
    """The cache key of a book's passages: the book, the generator (and the engine that runs it) and the settings
    that decide the text."""
    key = {"book": sha256, "generator": generator.identity, "tokenizer": generator.tokenizer_hash}
    if generator.config.backend != "transformers":  # another engine's arithmetic (or a server's sampler)
        key["backend"] = generator.config.backend
    return hashlib.sha256(json.dumps({**key, **config.generation_key(seed)}, sort_keys=True).encode()).hexdigest()


def _read_cached(path, config: ControlsConfig) -> list[Passage] | None:
    """The passages of a cache entry, or None when it is missing or damaged (a damaged entry is a miss)."""
    try:
        data = load_untrusted_json(path, "controls entry")
        if data.get("format") != CACHE_FORMAT:
            return None
        out = [
            Passage(
                int(p["start"]), str(p["context"]), str(p["prefix"]), str(p["real"]), tuple(map(str, p["synthetic"]))
            )
            for p in data["passages"]
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return out if all(len(p.synthetic) == config.samples for p in out) else None


@dataclass(frozen=True)
class _Pending:
    """A book whose synthetic suffixes are still to be written: its cache entry, its generator token ids, its
    passages' starts and the seed of its draws."""

    path: Path
    ids: list[int]
    starts: list[int]
    stream_seed: int


def _planned(text: str, sha256: str, generator: LoadedModel, config: ControlsConfig, seed: int):
    """The book's passages from the cache when it holds them, else what writing them needs (:class:`_Pending`)."""
    path = cache_root() / FOLDERS["controls"] / f"{passages_key(sha256, generator, config, seed)}.json"
    if (cached := _read_cached(path, config)) is not None:
        return cached
    ids = list(generator.tokenizer(text, add_special_tokens=False).input_ids)
    seed = _book_seed(seed, sha256)
    return _Pending(path, ids, passage_starts(len(ids), config, stream(seed, "controls_passages")), seed)


def write_suffixes(books: list[_Pending], generator: LoadedModel, config: ControlsConfig) -> list[list[Passage]]:
    """The passages of ``books`` with their synthetic suffixes, written by the generator in shared decoding loops
    (``config.generation_prompts`` passages a loop, several books' rows side by side), each passage from its own
    book's stream of uniforms, so a book's suffixes are those it gets alone; each book's cache entry is written."""
    c, p = config.context_tokens, config.prefix_tokens
    prompts = [b.ids[s : s + c + p] for b in books for s in b.starts]
    streams = [(b.stream_seed, i) for b in books for i in range(len(b.starts))]
    options = {"temperature": config.temperature, "batch_size": config.generation_prompts, "streams": streams}
    began = time.perf_counter()
    written = continuation_texts(generator, prompts, config.samples, config.suffix_tokens, options) if prompts else []
    rates.record_controls(
        generator.config, "generated_per_s", len(prompts) * config.samples * config.suffix_tokens,
        time.perf_counter() - began,
    )  # fmt: skip
    tok = generator.tokenizer

    def decode(x):
        return tok.decode(x, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    out = []
    for b in books:
        rows, written = written[: len(b.starts)], written[len(b.starts) :]
        ids = b.ids
        passages = [
            Passage(
                s,
                decode(ids[s : s + c]),
                decode(ids[s + c : s + c + p]),
                decode(ids[s + c + p : s + config.passage_tokens]),
                tuple(suffixes),
            )
            for s, suffixes in zip(b.starts, rows)
        ]
        record = {"format": CACHE_FORMAT, "generator": generator.identity, "passages": [asdict(x) for x in passages]}
        b.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(b.path, json.dumps(record))
        out.append(passages)
    return out


def book_passages(
    text: str, sha256: str, generator: LoadedModel, config: ControlsConfig, seed: int
) -> tuple[list, bool]:
    """The book's passages with their synthetic suffixes (drawn from the run's ``seed``), from the cache when it
    holds them; and whether they were generated now."""
    planned = _planned(text, sha256, generator, config, seed)
    if not isinstance(planned, _Pending):
        return planned, False
    return write_suffixes([planned], generator, config)[0], True


def passages_of_books(docs, generator: LoadedModel, config: ControlsConfig, seed: int) -> Iterator[tuple]:
    """Per text of ``docs``, in order: its index, its passages, whether they were generated now and the CPU
    seconds of its share of the generation. Texts not in the cache are written together, as soon as their passages
    fill a decoding loop (``config.generation_prompts``), so that a short run keeps what it wrote."""
    waiting: list[tuple[int, _Pending]] = []

    def flush():
        began = time.process_time()
        written = write_suffixes([b for _, b in waiting], generator, config)
        cpu = time.process_time() - began
        total = sum(len(b.starts) for _, b in waiting) or 1
        done = [(i, passages, True, cpu * len(b.starts) / total) for (i, b), passages in zip(waiting, written)]
        waiting.clear()
        return done

    for i, doc in enumerate(docs):
        planned = _planned(doc.text, doc.sha256, generator, config, seed)
        if not isinstance(planned, _Pending):
            yield i, planned, False, 0.0
            continue
        waiting.append((i, planned))
        if sum(len(b.starts) for _, b in waiting) >= config.generation_prompts:
            yield from flush()
    if waiting:
        yield from flush()


def passage_scores(lm: LoadedModel, passages: list[Passage], batch_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Scores (minus bits per byte: higher is more likely) of the real suffixes and of the synthetic ones (one row
    per passage) after context and prefix, and the tokens the model ran over."""
    m = len(passages[0].synthetic)
    pairs = [(p.context + p.prefix, s) for p in passages for s in (p.real, *p.synthetic)]
    began = time.perf_counter()
    scores = -bits_per_byte(lm, pairs, batch_size).reshape(len(passages), m + 1)
    seconds = time.perf_counter() - began
    n = scored_tokens(lm, pairs)
    rates.record_controls(lm.config, "scored_per_s", n, seconds)
    return scores[:, 0], scores[:, 1:], n


def examine_book(doc, models: dict, config: ControlsConfig, seed: int) -> BookControls:
    """One text through generation and scoring (``models``: ``generator``, ``target`` and optional ``reference``),
    its statistic and placebo; no p-value yet (that needs the library)."""
    began = time.process_time()
    passages, generated = book_passages(doc.text, doc.sha256, models["generator"], config, seed)
    return score_book(doc, (passages, generated, time.process_time() - began), models, config)


def score_book(doc, written: tuple, models: dict, config: ControlsConfig) -> BookControls:
    """One text's passages (``written``: the passages, whether they were generated now and the CPU seconds that
    took) scored by the target (and the reference), its statistic and placebo; no p-value yet."""
    passages, generated, generation_cpu = written
    began = time.process_time() - generation_cpu
    tokens = len(models["generator"].tokenizer(doc.text, add_special_tokens=False).input_ids)
    out = BookControls(doc.id, str(doc.path), doc.sha256, len(passages), tokens, profile=profile_of(doc.text))
    if len(passages) < 2 * config.block:
        out.reasons.append(
            Reason(
                "too_short_for_layout",
                f"too short: {len(passages)} passages (one per stretch of {config.stretch_tokens} generator tokens), "
                f"fewer than two blocks of {config.block}",
            )
        )
        return out
    scored = 0
    per_model = {}
    for role in ("target", "reference"):
        if models.get(role) is not None:
            real, synthetic, n = passage_scores(models[role], passages, config.batch_size)
            per_model[role] = contrasts(real, synthetic)
            scored += n
    keep = np.all([np.isfinite(a) for pair in per_model.values() for a in pair], axis=0)
    if keep.sum() < 2 * config.block:
        out.reasons.append("too few passages with a finite score (empty suffixes)")
        return out
    delta, placebo = (a[keep] for a in per_model["target"])
    out.target_contrast = float(delta.mean())
    if "reference" in per_model:
        ref_delta, ref_placebo = (a[keep] for a in per_model["reference"])
        out.reference_contrast = float(ref_delta.mean())
        delta, placebo = delta - ref_delta, placebo - ref_placebo
    out.contrast, out.placebo = block_mean(delta, config.block), block_mean(placebo, config.block)
    out.deltas = delta.tolist()
    out.interval = dependent_interval(delta)
    out.cost = {
        "tokens_generated": len(passages) * config.samples * config.suffix_tokens if generated else 0,
        "tokens_scored": scored,
        "cpu_seconds": round(time.process_time() - began, 3),
        "from_cache": not generated,
    }
    return out


def _rank_against(book: BookControls, usable: list[BookControls], config: ControlsConfig, seed: int) -> None:
    """The book's rank p-value among the library texts other than itself (a text with the book's SHA-256 is left
    out of its own comparison) at matched geometry (``inference.matched``: every text through as many consecutive
    passages, the book's count or, where too few library texts hold it for a p-value below ``alpha``, the largest
    count that enough of them hold, down to two blocks; the first passages drawn from ``seed`` and the book)."""
    others = [b for b in usable if b.sha256 != book.sha256]
    rng = stream(_book_seed(seed, book.sha256), "library_rank")
    needed = nonmembers_needed(config.alpha)
    rank = matched_rank(book.deltas, [b.deltas for b in others], rng, needed, 2 * config.block)
    book.library_texts, book.smallest_p, book.library_eligible = rank.texts, rank.smallest_p, len(others)
    book.p_value = rank.p_value
    book.compared_passages = rank.passages if rank.p_value is not None else None
    if rank.smallest_p < config.alpha:
        return
    layout = (
        f"{rank.passages} passages, one in each of {rank.passages} consecutive stretches of {config.stretch_tokens} "
        "generator tokens"
    )
    if rank.texts < len(others):
        book.reasons.append(
            Reason(
                "library_too_short",
                f"only {rank.texts} of the library's {len(others)} texts are long enough to hold the book's layout "
                f"({layout}), too few for a p-value below --alpha {config.alpha:g}: a book is compared only with "
                'texts whose passages lie as its own do (docs/methods.md, "Matched geometry")',
            )
        )
    else:
        book.reasons.append(
            Reason(
                "too_small_library",
                f"too small a null library: ranked among {rank.texts} never-seen texts the smallest p-value is "
                f"1/{rank.texts + 1} = {rank.smallest_p:.3g}, not below --alpha {config.alpha:g}; "
                f"{nonmembers_needed(config.alpha)} would be needed",
            )
        )


def judge(books: list[BookControls], library: list[BookControls] | None, config: ControlsConfig, seed: int = 0):
    """p-values (ranks against the library), the diagnostics' reasons, and the verdicts of the run's books
    (Benjamini–Hochberg over those with a p-value)."""
    usable = [b for b in library or [] if b.contrast is not None]
    if library is not None and len(usable) < config.min_library:
        raise DocauditError(
            f"the null library gave {len(usable)} usable texts, fewer than --min-library {config.min_library}"
        )
    ref_null = [b.reference_contrast for b in usable if b.reference_contrast is not None]
    for b in books:
        if b.contrast is None:
            continue
        if library is not None:
            _rank_against(b, usable, config, seed)
            b.p_value_blind, differs = library_check(b.profile, [u.profile for u in usable if u.sha256 != b.sha256])
            b.reasons += [differs] if differs else []
        else:
            b.reasons.append(NO_LIBRARY)
        placebo_p = b.placebo.t_p_value(two_sided=True)
        if placebo_p is not None and placebo_p < config.placebo_alpha:
            b.reasons.append(
                f"placebo failed: a synthetic suffix in the real one's place gives a contrast of "
                f"{b.placebo.mean:+.4f} bits/byte (p = {placebo_p:.2g}), not about 0"
            )
        if ref_null and b.reference_contrast is not None and not min(ref_null) <= b.reference_contrast <= max(ref_null):
            b.reasons.append(
                f"the reference model's real-vs-synthetic contrast ({b.reference_contrast:+.4f} bits/byte) lies "
                f"outside the range seen on the never-seen library texts ({min(ref_null):+.4f} to "
                f"{max(ref_null):+.4f})"
            )
    smallest = [b.smallest_p if b.p_value is not None else None for b in books]
    return run_verdicts([b.p_value for b in books], [b.reasons for b in books], None, config.alpha, smallest=smallest)


def controls_audit(docs, library_docs, models: dict, config: ControlsConfig, run: RunContext = RunContext()) -> dict:
    """Every book of ``docs`` tested (``library_docs``: the never-seen texts of the null, documents or texts
    already put through as :class:`BookControls`, or None for the reference-only test), the passages drawn from
    ``run.seed``; returns the books, the library's statistics and the verdicts."""
    from tqdm.auto import tqdm

    if library_docs is None and models.get("reference") is None:
        raise DocauditError("synthetic controls need a null: give --null-library DIR, --reference MODEL, or both")
    known = [d for d in library_docs or [] if isinstance(d, BookControls)]  # computed before (a shipped library)
    every = list(docs) + [d for d in library_docs or [] if not isinstance(d, BookControls)]
    tested = [None] * len(every)
    with tqdm(total=len(every), desc="synthetic controls", disable=not run.progress) as bar:
        for i, passages, generated, cpu in passages_of_books(every, models["generator"], config, run.seed):
            tested[i] = score_book(every[i], (passages, generated, cpu), models, config)
            bar.update()
    books, library = tested[: len(docs)], (known + tested[len(docs) :] if library_docs is not None else None)
    verdicts = judge(books, library, config, run.seed)
    return {"books": books, "library": library, "verdicts": verdicts}


def planned_cost(n_texts: int, config: ControlsConfig, scoring_models: int) -> dict:
    """The most a run can take for ``n_texts`` texts (books and library), before any model loads: passages, tokens
    generated, and tokens the scoring models run over (a short book has fewer passages; a cached book generates
    nothing)."""
    passages = n_texts * config.passages
    return {
        "texts": n_texts,
        "passages": passages,
        "tokens_generated": passages * config.samples * config.suffix_tokens,
        "tokens_scored": passages * (config.samples + 1) * (config.passage_tokens + 1) * scoring_models,
    }
