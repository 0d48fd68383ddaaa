"""Extraction (``extract``): how much of a book a model writes back, as Cooper et al. (2025) measure it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from docaudit.config.base import MAX_BATCH, MAX_TOKENS, check_count, check_range, setting
from docaudit.errors import DocauditError

MAX_VOCAB_K = 1 << 20
MAX_PASSAGES_SHOWN = 10_000


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

    @property
    def example_tokens(self) -> int:
        """The book's tokens one example takes (prefix and suffix, the BOS aside)."""
        return self.prefix_tokens + self.suffix_tokens

    def used(self) -> dict:
        """The settings as written into the output."""
        return asdict(self)
