"""Throughput measured on this machine, kept in the cache folder so that a later ``--dry-run`` or start line
estimates from it instead of the documented rates (``docaudit/config/rules.py``).

One entry per model as it is named (its resolved reference, backend, precision and device setting), written by
real runs: the querier's scored tokens per second over the model passes it made, its tokenizer's bytes per
token, the seconds loading the model took, and ``controls``' generated and scored tokens per second (kept apart:
a generated token costs a few scored ones); one machine entry for the meta-classifier's forests (seconds per
tree fit); one machine entry for the rest of each command's work (tokenizing, a detector's copies and scoring,
blind baselines, beyond-blind refits, bootstraps: seconds per token of its model passes), which a command measures
as its wall time less what :func:`clock` counts of passes, loading and forests. Entries are ``rates/<16
hex>.json`` (:mod:`docaudit.query.cache_entries`, kind ``rates``); a damaged or foreign entry is ignored, never
an error, and one older than ``RATE_MAX_AGE_DAYS`` is not used."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from docaudit.config import ModelConfig
from docaudit.config.rules import RATE_MAX_AGE_DAYS
from docaudit.io import atomic_write_text
from docaudit.query.cache import cache_root
from docaudit.untrusted import read_untrusted

RATES_FOLDER = "rates"
_MARKER = "docaudit-rate"
MIN_SECONDS = 1.0  # a query shorter than this says too little about the rate to be kept
MIN_TOKENIZED = 1000  # nor one of fewer tokens about the tokenizer's bytes per token


def model_key(config: ModelConfig) -> str:
    """What names a model's rates: its reference (an absolute path when it is a local one; the embedded default),
    backend, precision and device setting, the same before loading (``--dry-run``) and after."""
    spec = config.model
    if spec is not None and not spec.startswith(("http://", "https://")):
        path = Path(spec).expanduser()
        spec = str(path.resolve()) if path.exists() else spec
    fields = [spec or "(embedded)", config.backend, config.quantize or config.dtype, config.device]
    return json.dumps(fields)


def _path(key: str, root: Path | None = None) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(root or cache_root()) / RATES_FOLDER / f"{digest}.json"


def _read(key: str) -> dict:
    try:
        entry = json.loads(read_untrusted(_path(key), "rates").decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(entry, dict) or entry.get(_MARKER) != key:
        return {}
    return entry


def _write(key: str, **values: float) -> None:
    """Merge ``values`` (each with the time it was measured) into the entry; a cache that cannot be written is
    left as it is (a measurement is never worth an error)."""
    entry = _read(key) or {_MARKER: key}
    now = time.time()
    for name, value in values.items():
        entry[name] = {"value": float(value), "measured": now}
    try:
        atomic_write_text(_path(key), json.dumps(entry))
    except OSError:
        pass


def measured(key: str, name: str) -> float | None:
    """The recent measurement ``name`` of entry ``key`` (None when there is none, it is older than
    ``RATE_MAX_AGE_DAYS`` or not a positive finite number)."""
    item = _read(key).get(name)
    if not isinstance(item, dict):
        return None
    value, when = item.get("value"), item.get("measured")
    if not isinstance(value, (int, float)) or not isinstance(when, (int, float)):
        return None
    if not math.isfinite(value) or value <= 0 or time.time() - when > RATE_MAX_AGE_DAYS * 86400:
        return None
    return float(value)


_CLOCK: ContextVar[dict | None] = ContextVar("docaudit_clock", default=None)


@contextmanager
def clock() -> Iterator[dict]:
    """Within the block, the seconds of model passes (``passes``) and the tokens they scored (``tokens``), of
    loading models (``load``) and of the meta-classifier's forests (``forests``), as the querier, the loader and the
    classifier record them (in this process; a Ray worker's passes are not counted)."""
    totals = {"passes": 0.0, "tokens": 0, "load": 0.0, "forests": 0.0}
    token = _CLOCK.set(totals)
    try:
        yield totals
    finally:
        _CLOCK.reset(token)


def _count(**amounts: float) -> None:
    totals = _CLOCK.get()
    if totals is not None:
        for name, amount in amounts.items():
            totals[name] += amount


def record_query(config: ModelConfig, tokens: int, seconds: float, whole: tuple[int, int] = (0, 0)) -> None:
    """A query of ``tokens`` scored tokens took ``seconds`` of model passes (kept when long enough to mean
    something); ``whole``: the bytes and tokens of the texts it tokenized whole (the tokenizer's bytes per token,
    kept from a thousand tokens on)."""
    _count(passes=seconds, tokens=tokens)
    values = {}
    if seconds >= MIN_SECONDS and tokens > 0:
        values["tokens_per_s"] = tokens / seconds
    if whole[1] >= MIN_TOKENIZED:
        values["bytes_per_token"] = whole[0] / whole[1]
    if values:
        _write(model_key(config), **values)


def record_controls(config: ModelConfig, name: str, tokens: int, seconds: float) -> None:
    """``controls``' model passes: writing synthetic suffixes (``name`` ``generated_per_s``: generated tokens) or
    scoring suffixes after their context (``scored_per_s``: the tokens run over) took ``seconds`` of wall time,
    counted as passes; each kept as the model's rate when long enough to mean something."""
    _count(passes=seconds, tokens=tokens)
    if seconds >= MIN_SECONDS and tokens > 0:
        _write(model_key(config), **{name: tokens / seconds})


def record_load(config: ModelConfig, seconds: float, once: float = 0.0) -> None:
    """Loading the model took ``seconds``, and work done once per model file (``once``: converting it on its
    first use) took more; only the first is kept as the model's load time (later runs do not repeat the second)."""
    _count(load=seconds + once)
    _write(model_key(config), load_s=seconds)


_ONCE: ContextVar[dict | None] = ContextVar("docaudit_once", default=None)


@contextmanager
def loading() -> Iterator[dict]:
    """Within the block, the seconds of work done once per model file (``seconds``, :func:`one_time`)."""
    totals = {"seconds": 0.0}
    token = _ONCE.set(totals)
    try:
        yield totals
    finally:
        _ONCE.reset(token)


@contextmanager
def one_time() -> Iterator[dict]:
    """Work done once per model file (converting it on its first use), which a load time kept leaves out; the
    block's ``seconds`` in the dictionary it yields, once it ends."""
    start = time.perf_counter()
    took = {"seconds": 0.0}
    try:
        yield took
    finally:
        took["seconds"] = time.perf_counter() - start
        totals = _ONCE.get()
        if totals is not None:
            totals["seconds"] += took["seconds"]


CONVERSION_KEY = "(first use of a GGUF file)"


def record_conversion(size: int, seconds: float) -> None:
    """Converting a GGUF file of ``size`` bytes to safetensors (its first use) took ``seconds``."""
    if seconds >= MIN_SECONDS and size > 0:
        _write(CONVERSION_KEY, convert_s_per_gb=seconds / (size / 1e9))


FOREST_KEY = "(meta-classifier forests)"


def record_forest(trees: int, seconds: float) -> None:
    """Fitting (and scoring with) forests of ``trees`` trees in all took ``seconds``."""
    _count(forests=seconds)
    if seconds >= MIN_SECONDS and trees > 0:
        _write(FOREST_KEY, tree_s=seconds / trees)


OTHER_KEY = "(work beside the model passes)"
MIN_OTHER_TOKENS = 1000  # a command that passed fewer tokens says too little about its rest per token


def record_other(command: str, tokens: int, seconds: float) -> None:
    """Command ``command`` (its name and variant, e.g. ``evaluate+blind``) spent ``seconds`` beyond its model
    passes, loading and forests, over ``tokens`` tokens of model passes (kept from a thousand tokens on)."""
    if tokens >= MIN_OTHER_TOKENS and seconds > 0:
        _write(OTHER_KEY, **{f"{command} s/token": seconds / tokens})


def generation_key(config: ModelConfig, endpoint: str) -> str:
    """What names the rate of a model that writes text for ``probe``: the server and model named, or the model run
    in this process, and the endpoint."""
    return json.dumps(["generation", config.api_base or model_key(config), config.api_model, endpoint])


def record_generation(key: str, requests: int, seconds: float) -> None:
    """``requests`` generation requests (or prompts sampled in this process) took ``seconds`` in all."""
    if requests > 0 and seconds >= MIN_SECONDS:
        _write(key, request_s=seconds / requests)
