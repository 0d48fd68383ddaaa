"""A stored library of never-seen texts' extraction figures: the baseline ``extract`` reports beside a book without
running the texts again (the one shipped for the embedded Gemma, ``config.EXTRACT_NULL``).

A stored text keeps only its figures (tokens, examples, the extractable and greedy shares, the longest run, the
largest p_z), never its words. The file is untrusted input: it is used only where its key (the model's identity,
precision and tokenizer, and every setting that decides a figure) is the run's, and every figure is checked
before use; anything else is refused in one line or, where the run did not ask for it, left out with its reason."""

from __future__ import annotations

import math
from pathlib import Path

from docaudit.config import ExtractConfig
from docaudit.errors import DocauditError
from docaudit.untrusted import load_untrusted_json

FORMAT = 1
KIND = "extract_null"
#: The settings that decide a text's figures (not ``first_tokens``: a share is a fraction of the tokens read).
KEYED = ("prefix_tokens", "suffix_tokens", "stride", "top_k", "temperature", "n", "p")
#: Each stored figure and whether it is a count (an int) or a number; shares lie in [0, 1].
FIGURES = {
    "tokens": int,
    "examples": int,
    "discoverable_examples": int,
    "greedy_examples": int,
    "extractable_share": float,
    "greedy_share": float,
    "longest_run_tokens": int,
    "max_pz": float,
    "max_pz_greedy": float,
}
MAX_TEXTS = 100_000


def library_key(lm, config: ExtractConfig) -> dict:
    """What decides the stored figures: the model (identity, precision, tokenizer) and the keyed settings."""
    return {
        "model": {"identity": lm.identity, "precision": lm.precision, "tokenizer": lm.tokenizer_hash},
        "settings": {name: getattr(config, name) for name in KEYED},
    }


def library_document(key: dict, provenance: dict, texts: list[dict]) -> dict:
    """The stored library: its format, kind, key, provenance and texts (each its SHA-256 and figures)."""
    return {"format": FORMAT, "kind": KIND, "key": key, "provenance": provenance, "texts": texts}


def text_figures(sha256: str, summary: dict) -> dict:
    """One text as stored: the SHA-256 of the text as read and its figures."""
    return {"sha256": sha256, **{name: summary[name] for name in FIGURES}}


def _checked(text, i: int) -> dict:
    if not isinstance(text, dict) or not isinstance(text.get("sha256"), str):
        raise ValueError(f"text {i} is not an object with a sha256")
    for name, kind in FIGURES.items():
        value = text.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"text {i}: {name} is not a finite non-negative number")
        if kind is int and value != int(value):
            raise ValueError(f"text {i}: {name} is not a whole number")
        if name.endswith("share") or name.startswith("max_pz"):
            if value > 1:
                raise ValueError(f"text {i}: {name} is above 1")
    return {"sha256": text["sha256"]} | {name: kind(text[name]) for name, kind in FIGURES.items()}


def _difference(stored: dict, wanted: dict) -> str | None:
    """The first part of the key that differs, in words, or None."""
    model = stored.get("model") if isinstance(stored.get("model"), dict) else {}
    for name, value in wanted["model"].items():
        if model.get(name) != value:
            return f"it was computed with another model ({name} {model.get(name)}, this run's {value})"
    settings = stored.get("settings") if isinstance(stored.get("settings"), dict) else {}
    for name, value in wanted["settings"].items():
        if settings.get(name) != value:
            return f"it was computed with --{name.replace('_', '-')} {settings.get(name)}, this run uses {value}"
    return None


def read_library(path: Path, key: dict) -> tuple[list[dict] | None, dict, str | None]:
    """The stored texts' figures, the library's provenance, and why it does not apply to this run (its key differs
    from ``key``; then no figures); ``DocauditError`` in one line when the file cannot be read or is malformed."""
    try:
        data = load_untrusted_json(Path(path), "extraction library")
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ValueError("not an extraction null library")
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
        stored = data.get("key")
        texts = data.get("texts")
        if not isinstance(stored, dict) or not isinstance(texts, list) or not 0 < len(texts) <= MAX_TEXTS:
            raise ValueError("no key, or no list of 1 to 100,000 texts")
        checked = [_checked(t, i) for i, t in enumerate(texts)]
    except (OSError, ValueError, RecursionError) as error:
        raise DocauditError(f"the stored extraction library {path} cannot be used: {error}") from None
    provenance = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    differs = _difference(stored, key)
    return (None if differs else checked), provenance, differs


def stored_baseline(path: Path | None, lm, config: ExtractConfig) -> tuple[dict | None, dict]:
    """The stored library at ``path`` as ``extract_audit`` takes it (its texts' figures and source) where it applies
    to ``lm`` and ``config``, and what the output says of it: its path, texts and provenance, or why it was not
    used."""
    if path is None:
        return None, {"source": None, "why": "no library stored for this run"}
    texts, provenance, differs = read_library(path, library_key(lm, config))
    if texts is None:
        why = f"the stored library {Path(path).name} does not apply: {differs}; --null-library DIR gives a baseline"
        return None, {"source": None, "why": why}
    about = {"source": "stored", "path": str(path), "texts": len(texts), "provenance": provenance.get("texts")}
    return {"texts": texts, "source": "stored"}, about
