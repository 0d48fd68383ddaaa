"""``cache info`` and ``cache clear``: the entries docaudit keeps in its cache folder ($DOCAUDIT_CACHE or
~/.cache/docaudit), counted and cleared per kind (``query.cache_entries.KINDS``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from docaudit.api.common import Result, envelope_of
from docaudit.run import RunContext


@dataclass(frozen=True)
class CacheInfoRequest:
    """What the cache folder holds (``run``: the command line written into the JSON output)."""

    run: RunContext = field(default_factory=RunContext)


@dataclass
class CacheInfoResult(Result):
    """``summary``: the cache folder, entries and bytes per kind and in all, the token statistics per model
    identity, and the files docaudit did not write (``other``, never removed); ``rows``: one per kind."""

    schema: ClassVar[str] = "cache-info"
    summary: dict
    rows: list[dict]
    envelope: dict


def cache_info(request: CacheInfoRequest) -> CacheInfoResult:
    """Every kind of entry docaudit wrote in its cache folder (``query.cache_entries.summary``); a cache path that
    is a file, a device or under a kernel file system is refused in one line."""
    from docaudit.folders import folder_problem
    from docaudit.query.cache import cache_root
    from docaudit.query.cache_entries import summary

    if (problem := folder_problem(cache_root(), "cache folder")) is not None:
        raise problem
    found = summary()
    rows = [
        {"kind": kind, "entries": r["entries"], "MB": round(r["bytes"] / 1e6, 2), "what": r["what"]}
        for kind, r in found["kinds"].items()
    ]
    return CacheInfoResult(found, rows, envelope_of("cache-info", found, request.run))


@dataclass(frozen=True)
class CacheClearRequest:
    """Delete the entries of ``kinds`` docaudit wrote (``query.cache_entries.KINDS``, or ``all``); of the token
    statistics only those of the model identity ``model`` when given (which must have entries)."""

    kinds: Sequence[str] = ("stats",)
    model: str | None = None


@dataclass
class CacheClearResult:
    """The entries and bytes removed, in all and per kind (``kinds``)."""

    entries: int
    bytes: int
    kinds: dict

    def to_json(self) -> dict:
        return {"entries": self.entries, "bytes": self.bytes, "kinds": self.kinds}


def cache_clear(request: CacheClearRequest) -> CacheClearResult:
    """Delete the entries of the kinds asked for; nothing else under the cache folder is touched."""
    from docaudit.errors import DocauditError
    from docaudit.query.cache import StatsCache
    from docaudit.query.cache_entries import KINDS, clear

    kinds, model = request.kinds, request.model
    kinds = list(KINDS) if "all" in kinds else list(dict.fromkeys(kinds))
    if unknown := [k for k in kinds if k not in KINDS]:
        raise DocauditError(f"unknown cache kind(s) {', '.join(unknown)} (kinds: {', '.join(KINDS)}, all)")
    if model is not None and kinds != ["stats"]:
        raise DocauditError("--model selects token statistics only: give it with --kind stats (the default)")
    models = StatsCache().summary()["models"]
    if model is not None and model not in models:
        raise DocauditError(f"no cache entries of model '{model}' (models: {', '.join(models) or 'none'})")
    removed = clear(kinds, model)
    total = {"entries": sum(r["entries"] for r in removed.values()), "bytes": sum(r["bytes"] for r in removed.values())}
    return CacheClearResult(total["entries"], total["bytes"], removed)
