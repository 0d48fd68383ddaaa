"""Controlled experiments: the lab's target and copyright traps."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from docaudit.config.base import MAX_BATCH, MAX_COPIES, MAX_TOKENS, check_count, check_range, setting
from docaudit.config.seed import with_seed
from docaudit.errors import DocauditError
from docaudit.inference.verdicts import DEFAULT_ALPHA


@dataclass(frozen=True)
class TargetConfig:
    """A small causal language model trained from scratch on the member documents.

    ``positions`` is both the model's number of positions and the length of the training blocks; ``doc_tokens``
    keeps only the leading tokens of each document for training (None: all of them). ``dropout``
    and ``weight_decay`` default to 0 so that the target memorizes what it sees; ``warmup_fraction`` is the share
    of the optimizer steps with a linear learning-rate warmup, followed by a cosine decay to 10% of
    ``learning_rate``.
    """

    arch: str = setting("gpt2", "Architecture of the target.", "target", choices=("gpt2", "llama"))
    layers: int = setting(2, "Transformer layers.", "target")
    width: int = setting(128, "Hidden size.", "target")
    heads: int = setting(4, "Attention heads.", "target")
    positions: int = setting(128, "Target's positions and training block length.", "target")
    vocab_size: int = setting(2048, "BPE tokenizer size.", "target")
    epochs: int = setting(20, "Training epochs.", "target")
    learning_rate: float = setting(3e-3, "Peak learning rate.", "target")
    batch_size: int = setting(16, "Training batch.", "target", flag="--train-batch-size")
    doc_tokens: int | None = setting(2048, "Leading tokens per document used (train and test).", "target")
    dropout: float = 0.0
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05

    def __post_init__(self):
        if self.arch not in ("gpt2", "llama"):
            raise DocauditError(f"unknown target architecture {self.arch!r} (choose gpt2 or llama)")
        for name, flag, most in (
            ("layers", "--layers", 256),
            ("width", "--width", 65_536),
            ("heads", "--heads", 1024),
            ("positions", "--positions", 1 << 20),
            ("vocab_size", "--vocab-size", 1 << 22),
            ("epochs", "--epochs", 1_000_000),
            ("batch_size", "--train-batch-size", MAX_BATCH),
        ):
            check_count(flag, getattr(self, name), 1, most)
        if self.doc_tokens is not None:
            check_count("--doc-tokens", self.doc_tokens, 2, MAX_TOKENS)
        if self.width % self.heads:
            raise DocauditError(f"target width {self.width} is not divisible by heads {self.heads}")
        if self.positions < 2:
            raise DocauditError(f"target positions must be at least 2, got {self.positions}")
        if self.vocab_size < 300:
            raise DocauditError(f"vocab_size {self.vocab_size} is too small: byte-level BPE needs at least 300")
        if self.doc_tokens is not None and self.doc_tokens < 2:
            raise DocauditError(f"doc_tokens must be at least 2 or None, got {self.doc_tokens}")
        if self.learning_rate <= 0:
            raise DocauditError(f"learning_rate must be positive, got {self.learning_rate}")

    def used(self, seed: int) -> dict:
        """The settings with the run's ``seed`` where it has always stood (the identity of a training run)."""
        return with_seed(asdict(self), seed, after="doc_tokens")


# What a trap registry (a file from others, read by ``traps detect``) may hold: documents, sequences (traps and
# controls) in all, characters and token ids of one sequence, characters of a document's id (a file name too)
MAX_REGISTRY_DOCUMENTS = 10_000
MAX_REGISTRY_SEQUENCES = 100_000
MAX_SEQUENCE_CHARS = 1 << 18  # --trap-tokens at most 65,536, a few characters each
MAX_SEQUENCE_TOKENS = 1 << 16
MAX_ID_CHARS = 200  # with ".txt", within the 255 bytes of a file name


@dataclass(frozen=True)
class TrapConfig:
    """Copyright traps (Meeus et al. 2024, "Copyright Traps for Large Language Models"): per document,
    ``per_document`` synthetic sequences of ``tokens`` generator tokens are published ``copies`` times each, and as
    many control sequences from the same generator are kept private. Candidates are sampled from the generator's BOS
    at each of ``temperatures`` in turn (pure sampling: no top-k, no top-p), kept when their perplexity under the
    generator lies in ``[min_perplexity, max_perplexity)``, when they survive the retokenization check, and when the
    Jaccard similarity of their token sets to every trap kept so far is at most ``jaccard``; generation gives up
    after ``max_candidates`` candidates; ``traps make`` samples each after ``context_tokens`` tokens of a passage of
    the document's body (0: after the BOS alone, as the authors); unless ``any_text``, a trap must also read as
    prose in the documents' language (``corpus.prose``). ``alpha`` is the level of the verdict."""

    tokens: int = setting(100, "Trap length in generator tokens.", "traps", flag="--trap-tokens", aliases=("--tokens",))
    per_document: int = setting(8, "Traps (and controls) per document.", "traps", flag="--traps-per-doc")
    copies: int = setting(
        10, "Copies of each trap in its document.", "traps", flag="--trap-copies", aliases=("--copies",)
    )
    min_perplexity: float = setting(1.0, "Lowest perplexity of a trap under the generator.", "traps")
    max_perplexity: float = setting(1000.0, "Perplexity a trap stays below under the generator.", "traps")
    jaccard: float = setting(0.2, "Near-duplicate threshold.", "traps")
    any_text: bool = setting(
        False,
        "Keep traps that are not prose in the documents' language (markup, code, other languages): for a generator "
        "that writes no prose, as in a controlled experiment.",
        "traps",
    )
    temperatures: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    batch_size: int = 16
    max_candidates: int = 20000
    # Tokens of a passage of the document's body each candidate is sampled after (``traps make``; 0: from the BOS
    # alone, as the authors): a small generator writes the book's language after it, web text after a BOS alone.
    context_tokens: int = 64
    alpha: float = setting(DEFAULT_ALPHA, "Level of the verdict.", "method")

    def __post_init__(self):
        check_count("--trap-tokens", self.tokens, 2, MAX_SEQUENCE_TOKENS)
        check_count("--traps-per-doc", self.per_document, 1, MAX_COPIES)
        check_count("--trap-copies", self.copies, 1, MAX_COPIES)
        check_count("max_candidates", self.max_candidates, 1, 1 << 30)
        check_count("trap context_tokens", self.context_tokens, 0, 1 << 14)
        check_range("--min-perplexity", self.min_perplexity, 1.0)
        if not self.max_perplexity > self.min_perplexity:
            raise DocauditError(
                f"--max-perplexity {self.max_perplexity} must be above --min-perplexity {self.min_perplexity}"
            )
        check_range("--jaccard", self.jaccard, 0.0, 1.0)
        if not self.temperatures or any(not t > 0 for t in self.temperatures):
            raise DocauditError("trap generation temperatures must be positive")
        check_count("trap generation batch_size", self.batch_size, 1, MAX_BATCH)

    def used(self, seed: int) -> dict:
        """The settings as written into a trap registry, with the run's ``seed`` where it has always stood."""
        return with_seed(asdict(self), seed, after="context_tokens")
