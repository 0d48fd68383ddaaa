"""The methods' settings: the meta-classifier, its training, the detectors, the scaling study."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from docaudit.config.base import (
    FEATURES,
    MAX_BINS,
    MAX_COPIES,
    MAX_FOLDS,
    MAX_SEQUENCES,
    MAX_TOKENS,
    MAX_TREES,
    NORMS,
    check_count,
    check_range,
    setting,
)
from docaudit.config.query import ModelConfig, QueryConfig
from docaudit.config.seed import with_seed
from docaudit.errors import DocauditError


@dataclass(frozen=True)
class MetaConfig:
    """The meta-classifier (docs/methods.md, "Normalization dictionaries" to "Meta-classifier").
    ``norm``/``features`` = "auto" chooses them by inner cross-validation inside each training fold (the
    normalization among ``norms``)."""

    norm: str = setting("auto", "Meta-classifier normalization.", "method", choices=("auto", *NORMS))
    norms: tuple[str, ...] = NORMS
    features: str = setting("auto", "Meta-classifier features.", "method", choices=("auto", *FEATURES))
    bins: int = setting(1000, "HistFE bins.", "method")
    folds: int = setting(5, "k of the k-fold chunks.", "method")
    inner_folds: int = 3
    n_estimators: int = setting(500, "Random-forest trees.", "method", flag="--trees")
    # trees of the forests that only rank the candidates in the inner search of "auto" (the chosen pair is then fit
    # with ``n_estimators``): docs/benchmarks.md, "Model selection", measures AUC and time against 500; fewer on
    # small training sets (``search_trees``)
    select_trees: int = 100
    # the search's forests hold this many trees per training document (at least ``min_select_trees``, at most
    # ``select_trees``): on a few documents the inner AUC moves in steps of a document pair, whatever the forest
    min_select_trees: int = 20
    select_trees_per_document: int = 3
    max_depth: int = 5
    min_samples_leaf: int = 3
    maxnorm_eps: float = 1e-5
    agg_token_count: bool = False
    n_jobs: int = -1
    # forests of fewer training documents are fit on one job: on small sets the threads' overhead outweighs the
    # work they share (docs/benchmarks.md, "Forests on one job or many")
    parallel_from: int = 64

    def __post_init__(self):
        check_count("--bins", self.bins, 1, MAX_BINS)
        check_count("--folds", self.folds, 2, MAX_FOLDS)
        check_count("inner_folds", self.inner_folds, 2, MAX_FOLDS)
        check_count("--trees", self.n_estimators, 1, MAX_TREES)
        check_count("max_depth", self.max_depth, 1, 1000)
        check_count("min_samples_leaf", self.min_samples_leaf, 1, MAX_TOKENS)

    def candidates(self) -> list[tuple[str, str]]:
        """The (normalization, feature extractor) pairs this configuration may use."""
        norms = tuple(self.norms) if self.norm == "auto" else (self.norm,)
        feats = FEATURES if self.features == "auto" else (self.features,)
        return [(n, f) for n in norms for f in feats]

    def used(self, seed: int) -> dict:
        """The settings as written into outputs and classifier cards, with the run's ``seed`` (the folds' and the
        forests') where it has always stood."""
        return with_seed(asdict(self), seed, after="inner_folds")

    def jobs(self, documents: int) -> int:
        """The jobs that fit a forest on ``documents`` training documents."""
        return self.n_jobs if documents >= self.parallel_from else 1

    def forest_fits(self, n_fits: int = 1) -> int:
        """Forests grown by ``n_fits`` fits of the meta-classifier: each the inner search's (candidates x inner
        folds, none with a single candidate) and the chosen pipeline's one."""
        candidates = len(self.candidates())
        return n_fits * (1 + (candidates * self.inner_folds if candidates > 1 else 0))

    def search_trees(self, documents: int | None = None) -> int:
        """Trees of each forest of the inner search over ``documents`` training documents (None: as many as
        ``select_trees`` allows)."""
        most = min(self.select_trees, self.n_estimators)
        if documents is None:
            return most
        return min(most, max(self.min_select_trees, self.select_trees_per_document * documents))

    def trees(self, n_fits: int = 1, documents: int | None = None) -> int:
        """Trees grown by ``n_fits`` fits on ``documents`` training documents each (the inner search's smaller
        forests and the chosen one's)."""
        candidates = len(self.candidates())
        search = candidates * self.inner_folds * self.search_trees(documents) if candidates > 1 else 0
        return n_fits * (search + self.n_estimators)


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``docaudit train`` needs. ``raw``: query the files as they are (no boilerplate removal);
    ``normalize_chars``: also normalize typographic characters, emphasis markup and whitespace (off by default, so
    the work's text reaches the model as written: docs/methods.md, "Cleaning"); ``drop_duplicates``: leave out
    documents whose text is in both sets (otherwise they are an error)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)
    min_tokens: int = setting(0, "Skip documents with fewer tokens (paper: 5000).", "inputs")
    raw: bool = setting(False, "Keep the files as they are (no Gutenberg boilerplate removal).", "inputs")
    drop_duplicates: bool = setting(
        False, "Leave out documents found in both sets (by default they are an error).", "inputs"
    )
    normalize_chars: bool = setting(
        False,
        "Also normalize typographic characters (curly quotes, dashes, special spaces), emphasis markup (_x_) and "
        "whitespace. Off by default: the work's text reaches the model as written, only boilerplate is removed.",
        "inputs",
    )

    def __post_init__(self):
        check_count("--min-tokens", self.min_tokens, 0, MAX_TOKENS)


@dataclass(frozen=True)
class DetectorConfig:
    """Sequence-level detectors (docs/methods.md, "Sequence-level detectors"). ``k``: share of tokens averaged by
    Min-K% Prob and Min-K%++; PAC: top ``pac_k1`` and bottom ``pac_k2`` shares, ``pac_copies`` augmented copies with
    ``max(1, int(pac_swap_ratio * n_words))`` swaps each; Neighborhood: ``neighbors`` neighbours, each with
    ``max(1, int(neighbor_mask_ratio * n_tokens))`` masked-LM replacements. The run's seed seeds every augmentation.
    DC-PDD clips each token's value at ``dcpdd_a`` (the authors' ``a``); ReCaLL puts ``recall_prefix`` (non-member
    text) before each text."""

    k: float = setting(0.2, "Share of tokens averaged by Min-K% and Min-K%++.", "method")
    pac_k1: float = 0.05
    pac_k2: float = 0.3
    pac_copies: int = setting(5, "PAC: augmented copies per text.", "method")
    pac_swap_ratio: float = 0.3
    neighbors: int = 5
    neighbor_mask_ratio: float = 0.15
    dcpdd_a: float = 0.01
    recall_prefix: str = ""

    def __post_init__(self):
        for option, value in (
            ("--k", self.k),
            ("pac_k1", self.pac_k1),
            ("pac_k2", self.pac_k2),
            ("neighbor_mask_ratio", self.neighbor_mask_ratio),
        ):
            if not 0 < value <= 1:
                raise DocauditError(f"{option} {value} is out of range: allowed a share in (0, 1]")
        check_range("pac_swap_ratio", self.pac_swap_ratio, 0, 1)
        check_count("--pac-copies", self.pac_copies, 1, MAX_COPIES)
        check_count("neighbors", self.neighbors, 1, MAX_COPIES)
        if not self.dcpdd_a > 0:
            raise DocauditError(f"dcpdd_a {self.dcpdd_a} is out of range: allowed a positive number")

    def used(self, seed: int) -> dict:
        """The settings as written into outputs, with the run's ``seed`` (the augmentations') where it has always
        stood."""
        return with_seed(asdict(self), seed, after="neighbor_mask_ratio")


@dataclass(frozen=True)
class ScalingConfig:
    """Document-level scaling of sequence scores (paper sec. 6.2): ``n_sequences`` windows sampled per document
    (seeded), each window one sequence of the query context's length."""

    n_sequences: int = setting(
        40, "Sequences (windows of --context tokens) sampled per document.", "method", flag="--sequences"
    )

    def __post_init__(self):
        check_count("--sequences", self.n_sequences, 1, MAX_SEQUENCES)
