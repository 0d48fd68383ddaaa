"""Paired synthetic controls: the membership test whose controls are written from the judged book itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from docaudit.config.base import (
    MAX_BATCH,
    MAX_COPIES,
    MAX_SNIPPETS,
    check_count,
    check_range,
    setting,
)
from docaudit.config.seed import with_seed
from docaudit.errors import DocauditError

MAX_PASSAGE_TOKENS = 1 << 16  # context + prefix + suffix of one passage, in generator tokens
MAX_GENERATED_TOKENS = 10_000_000  # suffix tokens generated per book (passages x samples x suffix); about a day
MAX_TEMPERATURE = 100.0  # far above any useful sampling temperature (at 100, sampling is all but uniform)


@dataclass(frozen=True)
class ControlsConfig:
    """Per text (the book and every library text alike), up to ``passages`` passages, one at random in each of as many
    consecutive stretches of ``stretch_tokens`` generator tokens from a random offset (the same layout in every text, so
    a book is compared with library texts at matched geometry), each a context of ``context_tokens``, a prefix of
    ``prefix_tokens`` and the real suffix of ``suffix_tokens`` generator tokens. The generator writes ``samples``
    suffixes for each context and prefix (pure sampling at ``temperature``); the target scores the real and synthetic
    suffixes after the same context, in bits per byte. The book's statistic is the mean per-passage contrast (its
    interval allows neighbouring passages to correlate); the placebo's t-test takes its standard error from the means of
    ``block`` consecutive passages, and a book needs two blocks. A null library needs at least ``min_library`` texts (a
    library too small for its smallest p-value to reach ``alpha`` makes the verdict "inconclusive" instead); the placebo
    (a synthetic suffix in place of the real one) turns the verdict "inconclusive" when its contrast differs from 0 at
    level ``placebo_alpha``; ``alpha`` is the level of the verdict after Benjamini–Hochberg over the run."""

    passages: int = setting(32, "Most passages per text, one in each stretch of --stretch-tokens.", "method")
    stretch_tokens: int = setting(
        352,
        "Stretch of text holding one passage, in generator tokens (the same in the book and the library).",
        "method",
    )
    context_tokens: int = setting(48, "Context before each prefix, in generator tokens.", "method")
    prefix_tokens: int = setting(48, "Prefix the generator continues, in generator tokens.", "method")
    suffix_tokens: int = setting(48, "Suffix length (real and synthetic), in generator tokens.", "method")
    samples: int = setting(4, "Synthetic suffixes per prefix (at least 2: one serves the placebo).", "method")
    temperature: float = setting(1.0, "Sampling temperature of the generator.", "method")
    block: int = setting(4, "Consecutive passages per block of the placebo's standard error.", "method")
    min_library: int = setting(
        3, "Fewest never-seen texts a null library must give (fewer than 1/alpha - 1: inconclusive).", "method"
    )
    placebo_alpha: float = setting(
        0.01, "Level at which a non-zero placebo contrast makes a book inconclusive.", "method"
    )
    alpha: float = setting(0.05, "Level of the verdict (after Benjamini–Hochberg over the run).", "method")
    batch_size: int = 16
    # rows (prompts x samples) of one decoding loop of the generator, filled with the passages of several books:
    # 144 rows write three books at --preset fast at once (docs/benchmarks.md, "Batched generation across books")
    generation_rows: int = 144

    def __post_init__(self):
        check_count("--passages", self.passages, 1, MAX_SNIPPETS)
        for name in ("context_tokens", "prefix_tokens", "suffix_tokens"):
            check_count(f"--{name.replace('_', '-')}", getattr(self, name), 1, MAX_PASSAGE_TOKENS)
        check_count("--block", self.block, 1, MAX_SNIPPETS)
        check_count("batch_size", self.batch_size, 1, MAX_BATCH)
        check_count("generation_rows", self.generation_rows, 1, MAX_BATCH)
        check_count("--samples", self.samples, 2, MAX_COPIES)
        check_count("--min-library", self.min_library, 3, MAX_SNIPPETS)
        check_range("--placebo-alpha", self.placebo_alpha, 0.0, 1.0)
        check_range("--alpha", self.alpha, 0.0, 1.0)
        if not 0 < self.temperature <= MAX_TEMPERATURE:  # NaN fails too
            raise DocauditError(f"--temperature {self.temperature} is out of range: allowed above 0, up to 100")
        if self.passage_tokens > MAX_PASSAGE_TOKENS:
            raise DocauditError(
                f"--context-tokens, --prefix-tokens and --suffix-tokens add up to {self.passage_tokens:,} tokens, "
                f"more than the {MAX_PASSAGE_TOKENS:,} a passage may hold"
            )
        generated = self.passages * self.samples * self.suffix_tokens
        if generated > MAX_GENERATED_TOKENS:
            raise DocauditError(
                f"--passages x --samples x --suffix-tokens asks for {generated:,} generated tokens per book, more "
                f"than the {MAX_GENERATED_TOKENS:,} allowed (about a day of generation on a GPU)"
            )
        check_count("--stretch-tokens", self.stretch_tokens, 1, MAX_PASSAGE_TOKENS * MAX_SNIPPETS)
        if self.stretch_tokens < self.passage_tokens:
            raise DocauditError(
                f"--stretch-tokens {self.stretch_tokens} must hold a passage of {self.passage_tokens} tokens "
                "(--context-tokens + --prefix-tokens + --suffix-tokens)"
            )
        if self.passages < 2 * self.block:
            raise DocauditError(f"--passages {self.passages} must give at least two blocks of --block {self.block}")

    @property
    def passage_tokens(self) -> int:
        return self.context_tokens + self.prefix_tokens + self.suffix_tokens

    @property
    def generation_prompts(self) -> int:
        """Prompts (passages, each with its ``samples`` rows) per decoding loop of the generator."""
        return max(1, self.generation_rows // self.samples)

    @classmethod
    def preset(cls, name: str, **overrides) -> ControlsConfig:
        """The settings of a named preset (``CONTROLS_PRESETS``), then ``overrides``."""
        if name not in CONTROLS_PRESETS:
            raise DocauditError(f"--preset {name!r} is not one of {', '.join(sorted(CONTROLS_PRESETS))}")
        return cls(**CONTROLS_PRESETS[name] | overrides)

    def generation_key(self, seed: int) -> dict:
        """The settings that decide the generated text, with the run's ``seed`` (with the book and the generator
        they key its cache; the same seed gives the same key as when the seed was a setting here)."""
        key = {
            "layout": 2,  # 2: no passage in a text's first passage length (corpus.segments.stretch_starts)
            "passages": self.passages,
            "stretch_tokens": self.stretch_tokens,
            "context_tokens": self.context_tokens,
            "prefix_tokens": self.prefix_tokens,
            "suffix_tokens": self.suffix_tokens,
            "samples": self.samples,
            "temperature": self.temperature,
        }
        return with_seed(key, seed, after="temperature")

    def used(self, seed: int) -> dict:
        """The settings as written into the output, with the run's ``seed`` where it has always stood."""
        return with_seed(asdict(self), seed, after="alpha")


#: Named settings of ``controls --preset``. ``fast``: 16 passages of 32 + 32 + 32 generator tokens and 3 synthetic
#: suffixes (one serves the placebo), 1,536 generated and about 6,200 scored tokens per book and scoring model
#: instead of 6,144 and 23,200: sized so that one book with the embedded Gemma as generator and target stays within
#: about 15 CPU minutes on 2 cores (measured in docs/benchmarks.md); 16 passages still give 4 blocks of 4. Stretches
#: of 352 (default) and 704 (fast) tokens lay the passages across about 11,300 generator tokens, the length of the
#: 8,000-word excerpts of the shipped library, so a book at least that long gets every passage.
CONTROLS_PRESETS: dict[str, dict] = {
    "default": {},
    "fast": {
        "passages": 16,
        "stretch_tokens": 704,
        "context_tokens": 32,
        "prefix_tokens": 32,
        "suffix_tokens": 32,
        "samples": 3,
    },
}
