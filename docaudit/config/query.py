"""Which model and how it is queried: the model, the sliding window, Ray workers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from docaudit.config.base import (
    API_LOGPROBS,
    API_RETRIES_MAX,
    API_TIMEOUT_MAX,
    DTYPES,
    EXCERPTS,
    LLAMA_REPACK,
    MAX_BATCH,
    MAX_TOKENS,
    QUANTIZE,
    check_count,
    check_range,
    setting,
)
from docaudit.config.seed import SEED, with_seed
from docaudit.errors import DocauditError


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
    model; docs/benchmarks.md). ``llama_repack``: whether llama.cpp may move the weights into buffers repacked for
    this CPU (its "extra buffer types": AMX tiles, interleaved Q4_K rows); ``auto`` turns them off on a CPU with AMX,
    where llama.cpp's AMX path segfaults on the first evaluation of a Q4_K file (docs/benchmarks.md)."""

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
    llama_repack: str = setting(
        "auto",
        "llamacpp: weights repacked for this CPU's kernels (auto: off on CPUs with AMX, whose repacked path crashes "
        "in llama.cpp).",
        "model",
        choices=LLAMA_REPACK,
    )

    def __post_init__(self):
        check_range("--api-timeout", self.api_timeout, 0.001, API_TIMEOUT_MAX)
        check_range("--api-retries", self.api_retries, 0, API_RETRIES_MAX)
        check_range("api_backoff", self.api_backoff, 0, API_TIMEOUT_MAX)
        check_count("--api-retries", self.api_retries, 0, API_RETRIES_MAX)
        check_count("api_concurrency", self.api_concurrency, 1, 256)
        check_count("api_top_n", self.api_top_n, 1, 20)
        check_range("api_bias_tolerance", self.api_bias_tolerance, 1e-9, 100)
        if self.api_document_timeout is not None:
            check_range("--api-document-timeout", self.api_document_timeout, 0.001, None)
            if self.api_document_timeout == float("inf"):
                raise DocauditError("--api-document-timeout inf is out of range: allowed a finite number of seconds")
        if self.max_requests is not None:
            check_count("--max-requests", self.max_requests, 1, 1 << 62)
        if self.kv_cache not in ("f32", "f16"):
            raise DocauditError(f"--kv-cache must be f32 or f16, got {self.kv_cache!r}")
        if self.llama_repack not in LLAMA_REPACK:
            raise DocauditError(f"--llama-repack must be one of {', '.join(LLAMA_REPACK)}, got {self.llama_repack!r}")


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
    batch_size: int | None = setting(None, "Windows per forward pass (default: automatic).", "query")
    gp: bool = True

    def __post_init__(self):
        self.check()

    def check(self, max_context: int | None = None, note: str = "") -> QueryConfig:
        """The one rule for the query options of every command: ``--context`` in ``2..max_context`` (the
        model's usable positions, when known; ``note`` says why), ``--stride`` in ``1..context-1``, ``--max-tokens``
        at least 2, ``--batch-size`` at least 1. Values are refused with a one-line error, never adjusted.
        Returns the configuration itself."""
        most = MAX_TOKENS if max_context is None else max_context
        check_count("--context", self.context, 2, most, note)
        if self.stride is not None:
            check_count("--stride", self.stride, 1, self.context - 1, f"for --context {self.context}")
        if self.max_tokens is not None:
            check_count(
                "--max-tokens", self.max_tokens, 2, MAX_TOKENS, "a document needs at least 2 tokens to be queried"
            )
        if self.batch_size is not None:
            check_count("--batch-size", self.batch_size, 1, MAX_BATCH)
        if self.excerpt not in EXCERPTS:
            raise DocauditError(f"unknown excerpt mode '{self.excerpt}' (choose from {', '.join(EXCERPTS)})")
        return self

    @property
    def effective_stride(self) -> int:
        """The stride used: ``stride``, or ``context - 1`` (windows that overlap by one token) when unset."""
        return self.context - 1 if self.stride is None else self.stride

    def used(self, seed: int) -> dict:
        """The settings as used, for outputs: every field, with the stride actually used and the run's ``seed``
        (it picks the random excerpts) after ``excerpt``, where outputs have always had it."""
        return with_seed(asdict(replace(self, stride=self.effective_stride)), seed, after="excerpt")

    @classmethod
    def recorded(cls, used: dict) -> tuple[QueryConfig, int]:
        """The query and the run's seed an output recorded with :meth:`used` (a classifier card's ``query``); a
        record without a seed was made with the default one."""
        settings = dict(used)
        return cls(**{k: v for k, v in settings.items() if k != "seed"}), settings.get("seed", SEED)

    def key(self, seed: int) -> dict:
        """What changes the token statistics: the fields (batch size does not) and the run's ``seed``, which picks
        the random excerpts (a key computed with the same seed is the same as before it moved to the run)."""
        d = self.used(seed)
        d.pop("batch_size")
        return d


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
            check_count("--ray-workers", self.workers, 1, 100_000)
        check_range("cpus_per_worker", self.cpus_per_worker, 0)
        if self.gpus_per_worker is not None:
            check_range("gpus_per_worker", self.gpus_per_worker, 0)
        check_count("inflight", self.inflight, 1, 10_000)
        check_count("task_chars", self.task_chars, 1, MAX_TOKENS)
        check_count("max_restarts", self.max_restarts, 0, 10_000)
        check_count("retries", self.retries, 0, 10_000)
        check_range("start_timeout", self.start_timeout, 0)
