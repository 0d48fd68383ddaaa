"""Typed configuration with every default in one place (the methods are described in docs/methods.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from docaudit.errors import DocauditError

# The shipped classifier and manifests live at the repository's top level (models/, data_manifests/); the links in
# docaudit/_shipped/ point there, so the same paths work in a checkout and, as package data, in a wheel.
PACKAGE_DIR = Path(__file__).resolve().parent


DEFAULT_CLASSIFIER = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-pg"


MANIFESTS_DIR = PACKAGE_DIR / "_shipped" / "data_manifests"


NORMS = ("none", "ratio_tf", "ratio_gp", "max_tf", "max_gp")


FEATURES = ("agg", "hist")


DTYPES = ("float32", "bfloat16", "float16")


QUANTIZE = ("int8", "int4")


EXCERPTS = ("random", "leading")


API_LOGPROBS = ("auto", "echo", "logit_bias")


API_TIMEOUT_MAX = 86400.0  # seconds: the longest --api-timeout accepted (a day)
API_RETRIES_MAX = 100


MAX_DOCUMENT_BYTES = 1 << 30  # a larger file is refused (one document is read and cleaned in memory)
READ_JOBS = -1  # processes that read and clean documents (joblib; -1: one per core)
READ_JOBS_MIN_FILES = 16  # fewer files are read in this process (starting workers would cost more)


# Sections of a command's help, in the order shown; "openai" holds what only the OpenAI-compatible backend reads
SECTIONS = ("inputs", "model", "query", "method", "target", "traps", "output", "openai")


def setting(default, help: str, section: str, **option):
    """A field that is also a command-line option: its ``help`` text and help ``section`` (one of ``SECTIONS``)
    beside its default, so the option is declared here once (docaudit/cli/options.py builds it). ``option`` may
    give the option's ``flag`` (default: ``--`` and the field's name) and its ``choices``."""
    if section not in SECTIONS:
        raise ValueError(f"unknown help section {section!r} (sections: {', '.join(SECTIONS)})")
    return field(default=default, metadata={"help": help, "section": section, **option})


def check_range(option: str, value: float, lo: float, hi: float | None = None, note: str = "") -> None:
    """Refuse ``value`` outside ``lo..hi`` (``hi=None``: no upper bound) with a one-line error naming the option
    and the allowed range (``note`` says where the bound comes from)."""
    if value != value or value < lo or (hi is not None and value > hi):  # NaN is out of every range
        allowed = f"{lo}..{hi}" if hi is not None else f"{lo} or more"
        raise DocauditError(f"{option} {value} is out of range: allowed {allowed}{f' ({note})' if note else ''}")


TEXT_COLUMNS = ("text", "input", "snippet")  # WikiMIA: input; BookMIA and PAC's StackMIAsub: snippet
LABEL_COLUMNS = ("label",)
ID_COLUMNS = ("id",)
PAIR_COLUMNS = ("member", "nonmember")  # MIMIR: one member and one non-member text per row


@dataclass(frozen=True)
class DatasetConfig:
    """How a benchmark file (JSONL, CSV, Parquet) or Hugging Face dataset is read as documents: the columns that
    hold each row's text, label (1 = member), id and group (None: recognised by name, ``TEXT_COLUMNS`` etc.; a group
    only when named), the split of a dataset with several, and whether a group's rows are joined into one document
    (with ``GROUP_SEPARATOR`` between them)."""

    text_column: str | None = setting(
        None, f"Dataset column holding the text (default: the first of {', '.join(TEXT_COLUMNS)}).", "inputs"
    )
    label_column: str | None = setting(None, "Dataset column holding the label, 1 = member (default: label).", "inputs")
    id_column: str | None = setting(
        None, "Dataset column holding the row id (default: id, else the row index).", "inputs"
    )
    group_column: str | None = setting(
        None, "Dataset column grouping rows into documents (e.g. BookMIA's book_id).", "inputs"
    )
    split: str | None = setting(None, "Split of a Hugging Face dataset with several.", "inputs")
    join_groups: bool = True


GROUP_SEPARATOR = "\n\n"
HUB_PROBE_SECONDS = 3.0  # how long reaching the Hugging Face hub may take before a dataset id is read offline


@dataclass(frozen=True)
class ModelConfig:
    """Which target model to query and how. ``model=None`` is the embedded Gemma-3-270M.

    ``backend`` runs it (docs/methods.md, "Backends"): ``transformers`` in this process, ``llamacpp`` (a ``.gguf``
    through llama.cpp, not dequantized) or ``openai`` (an OpenAI-compatible server at ``api_base`` serving
    ``api_model``, with the key read from the environment variable ``api_key_env`` when set; ``model`` or
    ``api_tokenizer`` names the local tokenizer that matches the server's). The server gives prompt log-probabilities
    (``api_logprobs="echo"``) or only the top ``api_top_n`` of a generated token, searched with ``logit_bias`` to
    within ``api_bias_tolerance`` nats (``"logit_bias"``); ``auto`` asks the server. ``api_concurrency`` requests at
    once, each with ``api_timeout`` seconds for the whole request (connection to last byte) and ``api_retries``
    retries (backoff from ``api_backoff`` seconds, doubling), all of one document's requests within
    ``api_document_timeout`` seconds (None: no bound beyond those); a run that would need more than ``max_requests``
    requests stops before the first. ``kv_cache``: the precision of llama.cpp's K/V cache (``f32``, the default,
    agrees with the transformers backend to 1e-4 nats; ``f16`` is faster and differs by about 2e-3 on a trained
    model; docs/benchmarks.md)."""

    model: str | None = setting(
        None, "Hub id, local HF directory or .gguf file (default: embedded Gemma-3-270M).", "model"
    )
    dtype: str = setting("float32", "Precision of the model's weights and computation.", "model", choices=DTYPES)
    device: str = setting("auto", "cpu, cuda, cuda:1 … (auto: CUDA when present).", "model")
    quantize: str | None = setting(None, "Load the model in int8/int4 (bitsandbytes).", "model", choices=QUANTIZE)
    revision: str | None = setting(None, "Hub revision (branch, tag or commit).", "model")
    trust_remote_code: bool = setting(False, "Allow model code from the hub (off by default).", "model")
    backend: str = setting(
        "transformers",
        "What runs the model: transformers (this process), llamacpp (a .gguf through llama.cpp, not dequantized) or "
        "openai (an OpenAI-compatible server: --api-base, or --model http://HOST:PORT/v1#NAME).",
        "model",
    )
    api_base: str | None = setting(None, "The server's base URL, e.g. http://127.0.0.1:8000/v1.", "openai")
    api_model: str | None = setting(None, "The model name the server serves.", "openai")
    api_key_env: str | None = setting(None, "The environment variable holding the API key (never logged).", "openai")
    api_tokenizer: str | None = setting(
        None, "The server model's tokenizer (HF directory, hub id or .gguf; default: --model).", "openai"
    )
    api_logprobs: str = setting(
        "auto",
        "Prompt log-probabilities (echo), or top-n with a logit-bias search; auto asks the server.",
        "openai",
        choices=API_LOGPROBS,
    )
    api_top_n: int = 5
    api_bias_tolerance: float = 1e-3
    api_concurrency: int = 4
    api_timeout: float = setting(60.0, "Seconds one request may take as a whole (connection to last byte).", "openai")
    api_retries: int = setting(
        3, "Retries of a request after a timeout, a failed connection or a busy server.", "openai"
    )
    api_backoff: float = 1.0
    max_requests: int | None = setting(None, "Stop before a run that would need more requests.", "openai")
    api_document_timeout: float | None = setting(
        None,
        "Seconds all requests of one document may take together (default: no bound beyond --api-timeout and "
        "--api-retries).",
        "openai",
    )
    kv_cache: str = setting(
        "f32",
        "llamacpp: precision of the K/V cache (f16 is faster, its log-probabilities differ by ~2e-3).",
        "model",
        choices=("f32", "f16"),
    )

    def __post_init__(self):
        check_range("--api-timeout", self.api_timeout, 0.001, API_TIMEOUT_MAX)
        check_range("--api-retries", self.api_retries, 0, API_RETRIES_MAX)
        check_range("api_backoff", self.api_backoff, 0, API_TIMEOUT_MAX)
        check_range("api_concurrency", self.api_concurrency, 1, 256)
        check_range("api_top_n", self.api_top_n, 1, 20)
        check_range("api_bias_tolerance", self.api_bias_tolerance, 1e-9, 100)
        if self.api_document_timeout is not None:
            check_range("--api-document-timeout", self.api_document_timeout, 0.001, None)
            if self.api_document_timeout == float("inf"):
                raise DocauditError("--api-document-timeout inf is out of range: allowed a finite number of seconds")
        if self.max_requests is not None:
            check_range("--max-requests", self.max_requests, 1)
        if self.kv_cache not in ("f32", "f16"):
            raise DocauditError(f"--kv-cache must be f32 or f16, got {self.kv_cache!r}")


@dataclass(frozen=True)
class QueryConfig:
    """Sliding-window querying (docs/methods.md, "Querying"). ``stride = context - 1`` is the reference layout;
    smaller strides overlap windows so every scored token has at least ``context - stride`` tokens of context.
    ``max_tokens`` queries an excerpt of that many tokens per document (``excerpt``: a seeded random one or the
    leading one)."""

    context: int = setting(128, "Context length C of each window.", "query")
    stride: int | None = setting(None, "Stride S (default C-1; smaller values overlap windows).", "query")
    max_tokens: int | None = setting(None, "Query only an excerpt of this many tokens per document.", "query")
    excerpt: str = setting(
        "random", "Which excerpt --max-tokens takes: a seeded random one or the leading one.", "query", choices=EXCERPTS
    )
    seed: int = setting(0, "Seed of every random choice the command makes.", "method")
    batch_size: int | None = setting(None, "Windows per forward pass (default: automatic).", "query")
    gp: bool = True

    def __post_init__(self):
        self.check()

    def check(self, max_context: int | None = None, note: str = "") -> QueryConfig:
        """The one rule for the query options of every command: ``--context`` in ``2..max_context`` (the
        model's usable positions, when known; ``note`` says why), ``--stride`` in ``1..context-1``, ``--max-tokens``
        at least 2, ``--batch-size`` at least 1. Values are refused with a one-line error, never adjusted.
        Returns the configuration itself."""
        check_range("--context", self.context, 2, max_context, note)
        if self.stride is not None:
            check_range("--stride", self.stride, 1, self.context - 1, f"for --context {self.context}")
        if self.max_tokens is not None:
            check_range("--max-tokens", self.max_tokens, 2, None, "a document needs at least 2 tokens to be queried")
        if self.batch_size is not None:
            check_range("--batch-size", self.batch_size, 1)
        if self.excerpt not in EXCERPTS:
            raise DocauditError(f"unknown excerpt mode '{self.excerpt}' (choose from {', '.join(EXCERPTS)})")
        return self

    @property
    def effective_stride(self) -> int:
        """The stride used: ``stride``, or ``context - 1`` (windows that overlap by one token) when unset."""
        return self.context - 1 if self.stride is None else self.stride

    def used(self) -> dict:
        """The settings as used, for outputs: every field, with the stride actually used."""
        return asdict(replace(self, stride=self.effective_stride))

    def key(self) -> dict:
        """The fields that change the token statistics (batch size does not)."""
        d = asdict(self)
        d.pop("batch_size")
        d["stride"] = self.effective_stride
        return d


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
    seed: int = setting(0, "Seed of the folds and the random forest.", "method")
    n_estimators: int = setting(500, "Random-forest trees.", "method", flag="--trees")
    max_depth: int = 5
    min_samples_leaf: int = 3
    maxnorm_eps: float = 1e-5
    agg_token_count: bool = False
    n_jobs: int = -1

    def candidates(self) -> list[tuple[str, str]]:
        """The (normalization, feature extractor) pairs this configuration may use."""
        norms = tuple(self.norms) if self.norm == "auto" else (self.norm,)
        feats = FEATURES if self.features == "auto" else (self.features,)
        return [(n, f) for n in norms for f in feats]


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


@dataclass(frozen=True)
class DetectorConfig:
    """Sequence-level detectors (docs/methods.md, "Sequence-level detectors"). ``k``: share of tokens averaged by
    Min-K% Prob and Min-K%++; PAC: top ``pac_k1`` and bottom ``pac_k2`` shares, ``pac_copies`` augmented copies with
    ``max(1, int(pac_swap_ratio * n_words))`` swaps each; Neighborhood: ``neighbors`` neighbours, each with
    ``max(1, int(neighbor_mask_ratio * n_tokens))`` masked-LM replacements. ``seed`` seeds every augmentation.
    DC-PDD clips each token's value at ``dcpdd_a`` (the authors' ``a``); ReCaLL puts ``recall_prefix`` (non-member
    text) before each text."""

    k: float = setting(0.2, "Share of tokens averaged by Min-K% and Min-K%++.", "method")
    pac_k1: float = 0.05
    pac_k2: float = 0.3
    pac_copies: int = setting(5, "PAC: augmented copies per text.", "method")
    pac_swap_ratio: float = 0.3
    neighbors: int = 5
    neighbor_mask_ratio: float = 0.15
    seed: int = setting(0, "Seed of the augmentations (PAC, neighbours).", "method")
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
        check_range("--pac-copies", self.pac_copies, 1)
        check_range("neighbors", self.neighbors, 1)
        if not self.dcpdd_a > 0:
            raise DocauditError(f"dcpdd_a {self.dcpdd_a} is out of range: allowed a positive number")


@dataclass(frozen=True)
class ScalingConfig:
    """Document-level scaling of sequence scores (paper sec. 6.2): ``n_sequences`` windows sampled per document
    (seeded), each window one sequence of the query context's length."""

    n_sequences: int = setting(
        40, "Sequences (windows of --context tokens) sampled per document.", "method", flag="--sequences"
    )
    seed: int = 0


@dataclass(frozen=True)
class FetchConfig:
    """Downloading a manifest's books from a Project Gutenberg mirror. ``timeout`` bounds one file's whole
    download (connection, headers and body, however slowly the server sends them) and ``book_timeout`` everything
    spent on one book (every layout, round and backoff). After a round with transient failures the layouts are
    tried again up to ``retries`` times, ``backoff`` seconds after the first round, doubling each time. Without a
    sha256 in the manifest a file must be at least ``min_bytes`` long. ``overwrite`` lets an existing file that
    fails the manifest's checks be replaced."""

    workers: int = 4
    retries: int = 3
    backoff: float = 2.0
    timeout: float = 60.0
    book_timeout: float = 180.0
    min_bytes: int = 1024
    overwrite: bool = False


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
    seed: int = 0
    dropout: float = 0.0
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05

    def __post_init__(self):
        if self.arch not in ("gpt2", "llama"):
            raise DocauditError(f"unknown target architecture {self.arch!r} (choose gpt2 or llama)")
        for name in ("layers", "width", "heads", "positions", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise DocauditError(f"target {name} must be at least 1, got {getattr(self, name)}")
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


@dataclass(frozen=True)
class TrapConfig:
    """Copyright traps (Meeus et al. 2024, "Copyright Traps for Large Language Models"): per document,
    ``per_document`` synthetic sequences of ``tokens`` generator tokens are published ``copies`` times each, and as
    many control sequences from the same generator are kept private. Candidates are sampled from the generator's BOS
    at each of ``temperatures`` in turn (pure sampling: no top-k, no top-p), kept when their perplexity under the
    generator lies in ``[min_perplexity, max_perplexity)``, when they survive the retokenization check, and when the
    Jaccard similarity of their token sets to every trap kept so far is at most ``jaccard``; generation gives up
    after ``max_candidates`` candidates. ``alpha`` is the level of the verdict."""

    tokens: int = setting(50, "Trap length in generator tokens.", "traps")
    per_document: int = setting(8, "Traps (and controls) per document.", "traps", flag="--traps-per-doc")
    copies: int = setting(10, "Copies of each trap in its document.", "traps")
    min_perplexity: float = setting(1.0, "Lowest perplexity of a trap under the generator.", "traps")
    max_perplexity: float = setting(1000.0, "Perplexity a trap stays below under the generator.", "traps")
    jaccard: float = setting(0.2, "Near-duplicate threshold.", "traps")
    temperatures: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    batch_size: int = 16
    max_candidates: int = 20000
    seed: int = setting(0, "Seed of the trap generation and placement.", "traps")
    alpha: float = setting(0.05, "Level of the verdict.", "method")

    def __post_init__(self):
        check_range("--trap-tokens", self.tokens, 2)
        check_range("--traps-per-doc", self.per_document, 1)
        check_range("--copies", self.copies, 1)
        check_range("--min-perplexity", self.min_perplexity, 1.0)
        if not self.max_perplexity > self.min_perplexity:
            raise DocauditError(
                f"--max-perplexity {self.max_perplexity} must be above --min-perplexity {self.min_perplexity}"
            )
        check_range("--jaccard", self.jaccard, 0.0, 1.0)
        if not self.temperatures or any(not t > 0 for t in self.temperatures):
            raise DocauditError("trap generation temperatures must be positive")
        check_range("trap generation batch_size", self.batch_size, 1)


@dataclass(frozen=True)
class ContaminationConfig:
    """Per-book contamination rates (Min-K% Prob paper, sec. 5): ``snippets`` random snippets of ``snippet_words``
    words per book, scored by ``method`` in one window of up to ``max_context`` tokens; the threshold maximizes
    calibration accuracy, or meets ``target_fpr`` on the non-member snippets; Wilson intervals at ``confidence``, and
    book-level bootstrap intervals from ``book_bootstrap`` resamples of the calibration books and snippets."""

    method: str = setting("minkpp", "The detector that scores the snippets.", "method", flag="--methods")
    snippets: int = setting(100, "Random snippets per book.", "method")
    snippet_words: int = setting(512, "Words per snippet.", "method")
    target_fpr: float | None = setting(
        None,
        "Choose the threshold for this FPR on non-member snippets (default: maximize snippet accuracy).",
        "method",
    )
    max_context: int = setting(
        2048,
        "Largest window: a snippet is scored in one window of min(model positions, this) tokens, over several "
        "windows when longer.",
        "query",
    )
    confidence: float = setting(0.95, "Level of the Wilson and book-level intervals of each rate.", "method")
    book_bootstrap: int = setting(
        1000, "Resamples of calibration books and snippets behind the book-level interval.", "method"
    )


@dataclass(frozen=True)
class SequenceConfig:
    """Sequence-level evaluation (docs/methods.md, "Sequence-level evaluation"): each text scored in one window of
    up to ``max_context`` tokens; AUC and TPR at each of ``fprs`` with ``n_boot``-resample stratified bootstrap
    intervals, overall and per WikiMIA length bucket (``buckets``, words); the Min-K% / Min-K%++ share swept over
    ``ks``. ReCaLL's prefix, when none is given, is ``recall_shots`` non-member texts, left out of the evaluation.
    The blind baseline (docs/methods.md, "Blind baseline") runs on ``blind_folds`` chunks of the texts (0: off)."""

    max_context: int = setting(
        2048, "Largest window: each text is scored in one window of min(model positions, this) tokens.", "query"
    )
    fprs: tuple[float, ...] = (0.10, 0.05, 0.01)
    buckets: tuple[int, ...] = (32, 64, 128, 256)
    ks: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    n_boot: int = setting(1000, "Bootstrap resamples.", "method")
    seed: int = 0
    recall_shots: int = setting(5, "ReCaLL without --recall-prefix: non-member texts taken as the prefix.", "method")
    blind_folds: int = setting(5, "Chunks of the texts for the blind baseline (0: no baseline).", "method")


@dataclass(frozen=True)
class DatasetTestConfig:
    """The dataset-level test: the detector scores combined (``methods``), the random half splits whose
    p-values are combined (``splits``) and the model-free classifier of the blind p-value (``blind_kind``, chosen
    before seeing any data: choosing the best kind afterwards would make its p-value too small)."""

    methods: tuple[str, ...] = setting(("loss", "zlib", "mink", "minkpp"), "Detector scores to combine.", "method")
    splits: int = setting(10, "Random half splits whose p-values are combined.", "method")
    blind_kind: str = setting(
        "tfidf",
        "Model-free classifier of the texts whose p-value is reported beside the model's.",
        "method",
        choices=("tfidf", "nb", "dates"),
    )


@dataclass(frozen=True)
class BeyondBlindConfig:
    """What the model adds over the blind baseline (docs/methods.md, "Beyond the blind baseline"). The combined
    classifier is fit, inside each training fold, on scores from ``inner_folds``-fold cross-validation; ``delta``
    gets a paired stratified bootstrap interval (``n_boot`` resamples, level ``confidence``) and DeLong's one-sided
    p-value; the verdict needs the interval above 0 and p below ``p_level``. ``report`` compares on the calibration
    books with ``folds`` folds (fewer when a class has fewer books)."""

    inner_folds: int = 3
    n_boot: int = 1000
    confidence: float = 0.95
    p_level: float = 0.05
    folds: int = 5


@dataclass(frozen=True)
class RayConfig:
    """Querying on Ray workers (docs/scaling.md): a local instance (``address=None``) or a running cluster
    (``address``: ``auto``, ``HOST:PORT`` or ``ray://HOST:10001``). ``workers`` actors each hold one copy of the
    model (None: one per GPU of the cluster when the model is queried on GPUs, else one per ``cpus_per_worker``
    CPUs); ``gpus_per_worker`` None means 1 when the cluster has GPUs and the model's device is not ``cpu``. Each
    worker has up to ``inflight`` tasks queued, a task being consecutive documents of at most ``task_chars``
    characters (one document when longer). A worker that dies is restarted up to ``max_restarts`` times and its
    documents are sent again, each at most ``retries`` times; workers must start within ``start_timeout`` seconds."""

    address: str | None = setting(
        None,
        "Query on a running Ray cluster: auto, HOST:6379 or ray://HOST:10001 (docs/scaling.md).",
        "query",
        flag="--ray-address",
    )
    workers: int | None = setting(
        None,
        "Ray workers, each holding a copy of the model (implies --ray; default: one per GPU when the model is queried "
        "on GPUs, else one per CPU).",
        "query",
        flag="--ray-workers",
    )
    cpus_per_worker: float = 1.0
    gpus_per_worker: float | None = None
    inflight: int = 2
    task_chars: int = 1 << 16
    max_restarts: int = 3
    retries: int = 3
    start_timeout: float = 600.0

    def __post_init__(self):
        if self.workers is not None:
            check_range("--ray-workers", self.workers, 1)
        check_range("cpus_per_worker", self.cpus_per_worker, 0)
        if self.gpus_per_worker is not None:
            check_range("gpus_per_worker", self.gpus_per_worker, 0)
        check_range("inflight", self.inflight, 1)
        check_range("task_chars", self.task_chars, 1)
        check_range("max_restarts", self.max_restarts, 0)
        check_range("retries", self.retries, 0)
        check_range("start_timeout", self.start_timeout, 0)
