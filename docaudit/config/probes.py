"""The generation-only probes (``probe``): membership tests of a model that only writes text."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from docaudit.config.base import MAX_TOKENS, MAX_WORDS, check_count, check_range, setting
from docaudit.config.seed import with_seed
from docaudit.errors import DocauditError
from docaudit.inference.verdicts import DEFAULT_ALPHA

PROBES = ("ngram", "decop")
ENDPOINTS = ("chat", "completions")
NGRAM_STATISTICS = ("creativity", "coverage")
AGGREGATES = ("max", "mean")
MAX_PASSAGES = 10_000
MAX_SAMPLES = 1_000


@dataclass(frozen=True)
class ProbeConfig:
    """Per text, up to ``passages`` passages are drawn across it, one at random in each of as many consecutive stretches
    of ``stretch_words`` words from a random offset (the same layout in every text: matched geometry). ``ngram``: the
    model continues a passage's first ``prompt_words`` words ``samples`` times (at most ``new_tokens`` tokens each, at
    ``temperature``), each continuation compared with the real next ``continuation_words`` words by the authors'
    ``statistic`` (creativity index over n = 2..12, or coverage), ``aggregate`` over the samples. ``decop``: a passage
    of ``decop_words`` words and three paraphrases of it asked in all 24 orders, answers of at most ``answer_tokens``
    tokens at temperature 0; a text whose share of unreadable answers exceeds ``max_unreadable`` is inconclusive, and
    every text is when the library's accuracy is within ``floor_margin`` of 1/4 (the position-bias floor: the model does
    not read the options). The text's statistic is the mean over its passages, ranked against a null library of at least
    ``min_library`` texts, each long enough to hold the text's layout taken through as many consecutive passages;
    ``alpha`` is the level after Benjamini–Hochberg over the run. ``endpoint``: the server's chat or completions
    endpoint. ``price_prompt`` and ``price_completion`` (per token) give ``--dry-run``'s cost."""

    probe: str = setting(
        "ngram",
        "Which probe: ngram (n-gram coverage) or decop (multiple choice; a model that does not follow the format, "
        "a base model, gets 'inconclusive').",
        "method",
        choices=PROBES,
    )
    endpoint: str = setting(
        "chat", "The server's endpoint: chat (/chat/completions) or completions.", "openai", choices=ENDPOINTS
    )
    passages: int = setting(16, "Most passages per text, one in each stretch of --stretch-words.", "method")
    stretch_words: int = setting(
        500, "Stretch of text holding one passage, in words (the same in the book and the library).", "method"
    )
    prompt_words: int = setting(50, "ngram: words of a passage's opening the model continues.", "method")
    continuation_words: int = setting(50, "ngram: words of the real continuation compared with.", "method")
    samples: int = setting(4, "ngram: continuations sampled per passage.", "method")
    new_tokens: int = setting(96, "ngram: most tokens of a continuation.", "method")
    temperature: float = setting(1.0, "ngram: sampling temperature of the continuations.", "method")
    statistic: str = setting(
        "creativity", "ngram: creativity index (n = 2..12) or coverage.", "method", choices=NGRAM_STATISTICS
    )
    aggregate: str = setting(
        "max", "ngram: how the samples of a passage are combined (max or mean).", "method", choices=AGGREGATES
    )
    decop_words: int = setting(64, "decop: words per passage.", "method")
    answer_tokens: int = 8
    max_unreadable: float = setting(0.1, "decop: share of unreadable answers that makes a text inconclusive.", "method")
    floor_margin: float = setting(
        0.02, "decop: library accuracy within this of 1/4 means the model cannot answer the format.", "method"
    )
    min_library: int = setting(
        20,
        "Fewest never-seen texts a null library must give (20: the fewest whose smallest p is below 0.05).",
        "method",
    )
    alpha: float = setting(DEFAULT_ALPHA, "Level of the verdict (after Benjamini–Hochberg over the run).", "method")
    price_prompt: float | None = setting(None, "Price per prompt token, for --dry-run's cost.", "openai")
    price_completion: float | None = setting(None, "Price per generated token, for --dry-run's cost.", "openai")

    def __post_init__(self):
        for name, allowed in (
            ("probe", PROBES),
            ("endpoint", ENDPOINTS),
            ("statistic", NGRAM_STATISTICS),
            ("aggregate", AGGREGATES),
        ):
            if getattr(self, name) not in allowed:
                raise DocauditError(f"--{name} {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        check_count("--passages", self.passages, 1, MAX_PASSAGES)
        for name in ("prompt_words", "continuation_words", "decop_words"):
            check_count(f"--{name.replace('_', '-')}", getattr(self, name), 1, MAX_WORDS)
        check_count("--stretch-words", self.stretch_words, 1, MAX_WORDS * MAX_PASSAGES)
        if self.stretch_words < self.passage_words:
            raise DocauditError(
                f"--stretch-words {self.stretch_words} must hold a passage of {self.passage_words} words"
            )
        check_count("--samples", self.samples, 1, MAX_SAMPLES)
        check_count("--new-tokens", self.new_tokens, 1, MAX_TOKENS)
        check_count("answer_tokens", self.answer_tokens, 1, MAX_TOKENS)
        check_range("--temperature", self.temperature, 0.0, 100.0)
        check_range("--max-unreadable", self.max_unreadable, 0.0, 1.0)
        check_range("--floor-margin", self.floor_margin, 0.0, 0.75)
        check_count("--min-library", self.min_library, 3, 1 << 30)
        check_range("--alpha", self.alpha, 0.0, 1.0)
        for name in ("price_prompt", "price_completion"):
            if getattr(self, name) is not None:
                check_range(f"--{name.replace('_', '-')}", getattr(self, name), 0.0, None)

    @property
    def passage_words(self) -> int:
        """The words a passage takes from the text."""
        return self.prompt_words + self.continuation_words if self.probe == "ngram" else self.decop_words

    def used(self, seed: int) -> dict:
        """The settings as written into the output, with the run's ``seed``."""
        return with_seed(asdict(self), seed, after="alpha")
