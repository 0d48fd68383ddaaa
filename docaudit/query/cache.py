"""Content-addressed storage of TokenStats: atomic writes, so an interrupted run resumes where it stopped.

A key covers everything that changes the statistics — model identity, precision, tokenizer, query settings and
the hash of the exact text queried — and nothing downstream (normalization, features, classifier)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from docaudit.io import atomic_write
from docaudit.query.stats import TokenStats
from docaudit.untrusted import inflate_problem, members_problem, open_untrusted

log = logging.getLogger(__name__)


def cache_root() -> Path:
    """``$DOCAUDIT_CACHE`` or ``~/.cache/docaudit``."""
    root = os.environ.get("DOCAUDIT_CACHE") or Path.home() / ".cache" / "docaudit"
    return Path(root)


STATS_VERSION = 3  # bump when the querier's definition of a statistic (or of the tokens queried) changes


def stats_key(model_identity: dict, query_key: dict, text_sha256: str) -> str:
    """The cache key of a document's TokenStats: a hash of the model, the query settings that change the
    statistics, the text and ``STATS_VERSION``."""
    blob = json.dumps(
        {"v": STATS_VERSION, "model": model_identity, "query": query_key, "text": text_sha256}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class StatsCache:
    """TokenStats on disk under ``root/stats``, one ``.npz`` per key."""

    warned = False  # an unusable entry is reported once per process

    def __init__(self, root: Path | None = None):
        self.root = Path(root or cache_root()) / "stats"

    def path(self, key: str) -> Path:
        """The entry's file, under a two-character fan-out folder."""
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str, expect: dict | None = None) -> TokenStats | None:
        """The entry of ``key``, or None when there is none or it cannot be used (not a regular file, truncated,
        damaged, inflating past its bound, arrays inconsistent with each other or with ``expect``: ``context``,
        ``stride``, ``vocab_size``, ``gp``, ``max_tokens``; values that are not finite or impossible: a log
        probability above 0, a token id outside the vocabulary): such an entry is a miss, recomputed and replaced by
        ``put``."""
        path = self.path(key)
        if not os.path.lexists(path):
            return None
        try:
            stats, problem = read_entry(path)
            problem = problem or _inconsistency(stats, expect or {})
        except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile, zlib.error) as e:
            problem = f"{type(e).__name__}: {e}"
        if problem is None:
            return stats
        if not StatsCache.warned:
            StatsCache.warned = True
            log.warning("cache entry %s is unreadable (%s); recomputing it (and any other such entry)", path, problem)
        return None

    def put(self, key: str, stats: TokenStats, model: str | None = None) -> None:
        """Store ``stats`` under ``key``, atomically (a reader never sees a partial entry), with the identity of
        the ``model`` that produced it when given (for ``docaudit cache info``; ``Querier.store`` gives it).
        Statistics that are not finite are never stored."""
        if (problem := stats.nonfinite()) is not None:
            raise ValueError(f"refusing to cache non-finite statistics ({problem})")
        arrays = stats.to_arrays()
        if model is not None:
            arrays[MODEL_FIELD] = np.array(model)
        atomic_write(self.path(key), lambda f: np.savez(f, **arrays))

    def entries(self) -> list[Path]:
        """The entries docaudit wrote: ``stats/<2 hex>/<64 hex>.npz``, plain files in plain folders (nothing else
        under the root counts, and no link is followed: a linked fan-out folder is not docaudit's, so ``cache clear``
        never deletes through it and ``cache info`` lists it among what clearing leaves)."""
        if not _real_folder(self.root):
            return []
        return sorted(
            p
            for folder in self.root.iterdir()
            if len(folder.name) == 2 and _real_folder(folder)
            for p in folder.iterdir()
            if _ENTRY.fullmatch(p.name) and p.name[:2] == folder.name and p.is_file() and not p.is_symlink()
        )

    def summary(self) -> dict:
        """Size and number of entries in total and per model (entries from before models were recorded count
        under ``unrecorded``)."""
        models: dict[str, dict] = {}
        for path in self.entries():
            model = entry_model(path)
            row = models.setdefault(model, {"entries": 0, "bytes": 0})
            row["entries"] += 1
            row["bytes"] += path.stat().st_size
        return {
            "root": str(self.root),
            "entries": sum(r["entries"] for r in models.values()),
            "bytes": sum(r["bytes"] for r in models.values()),
            "models": dict(sorted(models.items())),
        }

    def clear(self, model: str | None = None) -> dict:
        """Delete docaudit's entries (only those of ``model`` when given) and the fan-out folders left empty;
        return how many entries and bytes were removed."""
        removed = {"entries": 0, "bytes": 0}
        for path in self.entries():
            if model is not None and entry_model(path) != model:
                continue
            size = path.stat().st_size
            path.unlink()
            removed["entries"] += 1
            removed["bytes"] += size
            try:
                path.parent.rmdir()
            except OSError:
                pass
        return removed


MODEL_FIELD = "model_identity"
MODEL_FIELD_BYTES = 1 << 16  # a longer recorded identity is not read (``cache info`` reads every entry's)
LOGP_TOLERANCE = 1e-3  # rounding a backend or server may leave above log p = 0
_ENTRY = re.compile(r"[0-9a-f]{64}\.npz")


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def read_entry(path: Path) -> tuple[TokenStats | None, str | None]:
    """The statistics in the entry at ``path``, or None and why not. Only a regular file is opened (a FIFO would
    block the run), and its members are read only when their inflated size is within the archive bound."""
    with open_untrusted(path, "statistics") as f:
        size = os.fstat(f.fileno()).st_size
        if (problem := members_problem(f, size)) is not None:
            return None, problem
        with zipfile.ZipFile(f) as archive:
            problem = inflate_problem(archive, size)
        if problem is not None:
            return None, problem
        f.seek(0)
        with np.load(f, allow_pickle=False) as arrays:
            return TokenStats.from_arrays(arrays), None


def entry_model(path: Path) -> str:
    """The model identity recorded in an entry, ``unrecorded`` for one written before it was recorded,
    ``unreadable`` for a damaged one."""
    try:
        with open_untrusted(path, "statistics") as f:
            if members_problem(f, os.fstat(f.fileno()).st_size) is not None:
                return "unreadable"
            archive = zipfile.ZipFile(f)
            if MODEL_FIELD not in {name.removesuffix(".npy") for name in archive.namelist()}:
                return "unrecorded"
            if archive.getinfo(f"{MODEL_FIELD}.npy").file_size > MODEL_FIELD_BYTES:
                return "unreadable"
            f.seek(0)
            with np.load(f, allow_pickle=False) as arrays:
                return str(arrays[MODEL_FIELD])
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error):
        return "unreadable"


def _inconsistency(stats: TokenStats, expect: dict) -> str | None:
    """What makes cached statistics unusable (wrong shapes, types or settings), or None."""
    found = {
        "context": stats.context,
        "stride": stats.stride,
        "vocab_size": stats.vocab_size,
        "gp": stats.gp_sum is not None,
    }
    wrong = [k for k, v in expect.items() if k in found and found[k] != v]
    if wrong:
        return f"{', '.join(wrong)} differ from this query's"
    n = stats.n_tokens
    if stats.token_ids.ndim != 1 or stats.token_ids.dtype.kind not in "iu" or n < 2:
        return "bad token ids"
    if not (2 <= stats.context and 1 <= stats.stride < stats.context and stats.vocab_size >= 1):
        return "bad window settings"
    for name in ("logp", "max_logp", "mu", "sigma"):
        values = getattr(stats, name)
        if values.dtype.kind != "f" or values.shape != (n - 1,):
            return f"{name} does not match the {n} tokens"
    if stats.gp_sum is not None and (stats.gp_sum.dtype.kind != "f" or stats.gp_sum.shape != (stats.vocab_size,)):
        return "gp_sum does not match the vocabulary"
    if not 0 <= stats.floored <= n - 1:
        return "bad count of floored values"
    if expect.get("max_tokens") is not None and n > expect["max_tokens"]:
        return f"{n} tokens, more than this query's excerpt of {expect['max_tokens']}"
    return stats.nonfinite() or _impossible(stats)


def _impossible(stats: TokenStats) -> str | None:
    """Which statistic holds a value no model gives, or None: a token id outside the vocabulary, a log probability
    (or its maximum, or its mean under p) above 0, a log probability above its maximum, a mean of log p under p
    above its maximum or below -log V (an entropy above log V), a negative standard deviation or softmax sum, or a
    standard deviation of log p above log V + 1 (over V tokens it is at most sqrt(log(V)^2 / 4 + 1)). Statistics a
    backend does not give are NaN, and pass."""
    ids, tol = stats.token_ids, LOGP_TOLERANCE
    if ids.min() < 0 or ids.max() >= stats.vocab_size:
        return f"a token id outside the vocabulary of {stats.vocab_size}"
    for name in ("logp", "max_logp", "mu"):
        if (getattr(stats, name) > tol).any():
            return f"{name} holds a log probability above 0"
    if (stats.logp > stats.max_logp + tol).any():
        return "a log probability above the largest one at its position (max_logp)"
    log_v = math.log(stats.vocab_size)
    if (stats.mu > stats.max_logp + tol).any() or (stats.mu < -log_v - tol).any():
        return f"a mean log probability above its maximum or below -log {stats.vocab_size}"
    if (stats.sigma < 0).any() or (stats.gp_sum is not None and (stats.gp_sum < 0).any()):
        return "a negative standard deviation or softmax sum"
    if (stats.sigma > log_v + 1 + tol).any():
        return f"a standard deviation of log p larger than any distribution over {stats.vocab_size} tokens has"
    return None
