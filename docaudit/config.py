"""Typed configuration with every default in one place (the methods are described in docs/methods.md)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

NORMS = ("none", "ratio_tf", "ratio_gp", "max_tf", "max_gp")
FEATURES = ("agg", "hist")
DTYPES = ("float32", "bfloat16", "float16")
QUANTIZE = ("int8", "int4")


@dataclass(frozen=True)
class ModelConfig:
    """Which target model to query and how. ``model=None`` is the embedded Gemma-3-270M."""

    model: str | None = None
    dtype: str = "float32"
    device: str = "auto"
    quantize: str | None = None
    revision: str | None = None
    trust_remote_code: bool = False


@dataclass(frozen=True)
class QueryConfig:
    """Sliding-window querying (docs/methods.md, "Querying"). ``stride = context - 1`` is the reference layout;
    smaller strides overlap windows so every scored token has at least ``context - stride`` tokens of context."""

    context: int = 128
    stride: int | None = None
    max_tokens: int | None = None
    excerpt: str = "random"
    seed: int = 0
    batch_size: int | None = None
    gp: bool = True

    @property
    def effective_stride(self) -> int:
        return self.context - 1 if self.stride is None else self.stride

    def key(self) -> dict:
        """The fields that change the token statistics (batch size does not)."""
        d = asdict(self)
        d.pop("batch_size")
        d["stride"] = self.effective_stride
        return d


@dataclass(frozen=True)
class MetaConfig:
    """The meta-classifier (docs/methods.md, "Normalization dictionaries" to "Meta-classifier").
    ``norm``/``features`` = "auto" chooses them by inner cross-validation inside each training fold."""

    norm: str = "auto"
    features: str = "auto"
    bins: int = 1000
    folds: int = 5
    inner_folds: int = 3
    seed: int = 0
    n_estimators: int = 500
    max_depth: int = 5
    min_samples_leaf: int = 3
    maxnorm_eps: float = 1e-5
    agg_token_count: bool = False
    n_jobs: int = -1

    def candidates(self) -> list[tuple[str, str]]:
        """The (normalization, feature extractor) pairs this configuration may use."""
        norms = NORMS if self.norm == "auto" else (self.norm,)
        feats = FEATURES if self.features == "auto" else (self.features,)
        return [(n, f) for n in norms for f in feats]


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``docaudit train`` needs. ``raw``: query the files as they are (no boilerplate removal);
    ``normalize_chars``: also normalize typographic characters, emphasis markup and whitespace (off by default, so
    the work's text reaches the model as written: docs/methods.md, "Cleaning")."""

    model: ModelConfig = field(default_factory=ModelConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)
    min_tokens: int = 0
    raw: bool = False
    normalize_chars: bool = False


@dataclass(frozen=True)
class DetectorConfig:
    """Sequence-level detectors (docs/methods.md, "Sequence-level detectors"). ``k``: share of tokens averaged by
    Min-K% Prob and Min-K%++; PAC: top ``pac_k1`` and bottom ``pac_k2`` shares, ``pac_copies`` augmented copies with
    ``max(1, int(pac_swap_ratio * n_words))`` swaps each; Neighborhood: ``neighbors`` neighbours, each with
    ``max(1, int(neighbor_mask_ratio * n_tokens))`` masked-LM replacements. ``seed`` seeds every augmentation."""

    k: float = 0.2
    pac_k1: float = 0.05
    pac_k2: float = 0.3
    pac_copies: int = 5
    pac_swap_ratio: float = 0.3
    neighbors: int = 5
    neighbor_mask_ratio: float = 0.15
    seed: int = 0


@dataclass(frozen=True)
class ScalingConfig:
    """Document-level scaling of sequence scores (paper sec. 6.2): ``n_sequences`` windows sampled per document
    (seeded), each window one sequence of the query context's length."""

    n_sequences: int = 40
    seed: int = 0
