"""Extraction (``extract``): how much of a book a model writes back, as Cooper et al. (2025) measure it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from docaudit.config.base import MAX_BATCH, MAX_TOKENS, MAX_WORDS, check_count, check_range, setting
from docaudit.errors import DocauditError

MAX_VOCAB_K = 1 << 20
MAX_PASSAGES_SHOWN = 10_000
MODES = ("pz", "continuation")
ENDPOINTS = ("chat", "completions")
MAX_PROMPTS = 10_000
MAX_SAMPLES = 1_000


@dataclass(frozen=True)
class ExtractConfig:
    """Each book's token ids are cut into examples of ``prefix_tokens`` + ``suffix_tokens`` tokens every
    ``stride`` tokens (Cooper et al. 2025: 50 / 50 / 10), each read after the model's BOS when its tokenizer uses
    one. p_z is the probability that the model writes the suffix given the prefix, under greedy decoding and under
    top-``top_k`` sampling at ``temperature`` (the authors' ``compute_logprob_batch``). A suffix is
    (``n``, ``p``)-discoverable when 1 − (1 − p_z)^n ≥ p under top-k sampling; with the defaults n = 1, p = 0.001 that
    is p_z ≥ 0.001, one chance in a thousand of writing all 50 tokens verbatim in one try. ``max_tokens`` bounds the
    tokens of a book (refused before any model runs), ``first_tokens`` (when set) keeps only a text's
    first tokens, bounding the work per book; ``batch_size`` examples run through the model at once;
    ``passages`` is the most extractable passages quoted per book."""

    prefix_tokens: int = setting(50, "Tokens of an example's prefix (the prompt).", "method")
    suffix_tokens: int = setting(50, "Tokens of an example's suffix (what the model must write).", "method")
    stride: int = setting(10, "Tokens between the starts of consecutive examples.", "method")
    top_k: int = setting(40, "k of top-k sampling (the greedy p_z is computed as well).", "method")
    temperature: float = setting(1.0, "Sampling temperature of the top-k p_z.", "method")
    n: int = setting(1, "Tries of (n, p)-discoverability: 1 - (1 - p_z)^n >= p.", "method")
    p: float = setting(0.001, "Probability of (n, p)-discoverability.", "method")
    max_tokens: int = setting(2_000_000, "Most tokens of one book (a longer one is refused before any work).", "query")
    first_tokens: int | None = setting(
        None, "Extract from the first this many tokens of each text only (default: the whole text).", "query"
    )
    batch_size: int = setting(16, "Examples per forward pass.", "query")
    passages: int = setting(20, "Most extractable passages quoted per book (longest first).", "output")
    mode: str = setting(
        "pz",
        "pz: the probability of writing each example's suffix (a model run here, or a server that echoes prompt "
        "log-probabilities); continuation: what the model writes after passages of the book (any server, chat "
        "included), compared with the real continuation.",
        "method",
        choices=MODES,
    )

    def __post_init__(self):
        check_count("--prefix-tokens", self.prefix_tokens, 1, MAX_TOKENS)
        check_count("--suffix-tokens", self.suffix_tokens, 1, MAX_TOKENS)
        if not isinstance(self.stride, bool) and isinstance(self.stride, int) and self.stride < 1:
            raise DocauditError(f"--stride {self.stride} must be at least 1 (a stride of 0 never moves along the book)")
        check_count("--stride", self.stride, 1, MAX_TOKENS)
        check_count("--top-k", self.top_k, 1, MAX_VOCAB_K)
        check_range("--temperature", self.temperature, 1e-6, 100.0)
        check_count("--n", self.n, 1, 1 << 40)
        if not 0.0 < self.p <= 1.0 or self.p != self.p:
            raise DocauditError(f"--p {self.p} is out of range: allowed above 0 and at most 1")
        check_count("--max-tokens", self.max_tokens, 1, MAX_TOKENS)
        if self.first_tokens is not None:
            check_count("--first-tokens", self.first_tokens, self.example_tokens, MAX_TOKENS)
        check_count("--batch-size", self.batch_size, 1, MAX_BATCH)
        check_count("--passages", self.passages, 0, MAX_PASSAGES_SHOWN)
        if self.mode not in MODES:
            raise DocauditError(f"--mode {self.mode!r} is not one of {', '.join(MODES)}")

    @property
    def example_tokens(self) -> int:
        """The book's tokens one example takes (prefix and suffix, the BOS aside)."""
        return self.prefix_tokens + self.suffix_tokens

    def used(self) -> dict:
        """The settings as written into the output."""
        return asdict(self)


@dataclass(frozen=True)
class ContinuationConfig:
    """``extract --mode continuation`` (Ahmed, Cooper, Koyejo & Liang 2026): per text, up to ``prompts`` passages,
    one at random in each consecutive stretch of ``stretch_words`` words (``probe``'s layout); the model continues
    each passage's first ``prompt_words`` words ``samples`` times (at most ``new_tokens`` tokens each, at
    ``ExtractConfig.temperature``), each continuation compared with the real next ``continuation_words`` words: the
    longest common substring in words and characters, and the share of the real words recovered in order in blocks
    of at least ``min_match_words``. A passage has a long match when its longest common substring reaches
    ``long_match_words`` words. ``endpoint``: the server's chat or completions endpoint; ``price_prompt`` and
    ``price_completion`` (per token) give ``--dry-run``'s cost."""

    prompts: int = setting(
        16, "continuation: most passages per text, one in each stretch of --stretch-words.", "method"
    )
    stretch_words: int = setting(500, "continuation: stretch of text holding one passage, in words.", "method")
    prompt_words: int = setting(50, "continuation: words of a passage's opening the model continues.", "method")
    continuation_words: int = setting(50, "continuation: words of the real continuation compared with.", "method")
    samples: int = setting(4, "continuation: continuations sampled per passage.", "method")
    new_tokens: int = setting(96, "continuation: most tokens of a continuation.", "method")
    min_match_words: int = setting(5, "continuation: shortest matching block counted in the word recall.", "method")
    long_match_words: int = setting(
        20, "continuation: words of a common run that make a passage's match long.", "method"
    )
    endpoint: str = setting(
        "chat", "continuation: the server's endpoint, chat (/chat/completions) or completions.", "openai",
        choices=ENDPOINTS,
    )  # fmt: skip
    price_prompt: float | None = setting(None, "Price per prompt token, for --dry-run's cost.", "openai")
    price_completion: float | None = setting(None, "Price per generated token, for --dry-run's cost.", "openai")

    def __post_init__(self):
        if self.endpoint not in ENDPOINTS:
            raise DocauditError(f"--endpoint {self.endpoint!r} is not one of {', '.join(ENDPOINTS)}")
        check_count("--prompts", self.prompts, 1, MAX_PROMPTS)
        for name in ("prompt_words", "continuation_words", "min_match_words", "long_match_words"):
            check_count(f"--{name.replace('_', '-')}", getattr(self, name), 1, MAX_WORDS)
        check_count("--stretch-words", self.stretch_words, self.prompt_words + self.continuation_words, MAX_WORDS)
        check_count("--samples", self.samples, 1, MAX_SAMPLES)
        check_count("--new-tokens", self.new_tokens, 1, MAX_TOKENS)
        for name in ("price_prompt", "price_completion"):
            if getattr(self, name) is not None:
                check_range(f"--{name.replace('_', '-')}", getattr(self, name), 0.0, None)

    def layout(self, temperature: float):
        """The same passages, prompts and cost as ``probe --probe ngram`` with these settings."""
        from docaudit.config.probes import ProbeConfig

        return ProbeConfig(
            probe="ngram", endpoint=self.endpoint, passages=self.prompts, stretch_words=self.stretch_words,
            prompt_words=self.prompt_words, continuation_words=self.continuation_words, samples=self.samples,
            new_tokens=self.new_tokens, temperature=temperature, price_prompt=self.price_prompt,
            price_completion=self.price_completion,
        )  # fmt: skip

    def used(self) -> dict:
        """The settings as written into the output."""
        return asdict(self)
