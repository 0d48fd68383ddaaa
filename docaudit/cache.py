"""Content-addressed storage of TokenStats: atomic writes, so an interrupted run resumes where it stopped.

A key covers everything that changes the statistics — model identity, precision, tokenizer, query settings and
the hash of the exact text queried — and nothing downstream (normalization, features, classifier)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from .stats import TokenStats


def cache_root() -> Path:
    """``$DOCAUDIT_CACHE`` or ``~/.cache/docaudit``."""
    root = os.environ.get("DOCAUDIT_CACHE") or Path.home() / ".cache" / "docaudit"
    return Path(root)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write) -> None:
    """Write through ``write(file_object)`` to a temporary file beside ``path``, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


STATS_VERSION = 3  # bump when the querier's definition of a statistic (or of the tokens queried) changes


def stats_key(model_identity: dict, query_key: dict, text_sha256: str) -> str:
    blob = json.dumps({"v": STATS_VERSION, "model": model_identity, "query": query_key, "text": text_sha256},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class StatsCache:
    """TokenStats on disk under ``root/stats``, one ``.npz`` per key."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or cache_root()) / "stats"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str) -> TokenStats | None:
        path = self.path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as arrays:
                return TokenStats.from_arrays(arrays)
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            return None

    def put(self, key: str, stats: TokenStats) -> None:
        atomic_write(self.path(key), lambda f: np.savez(f, **stats.to_arrays()))
