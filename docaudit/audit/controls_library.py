"""A null library for ``controls`` computed once and stored: the per-passage contrasts of never-seen texts, keyed by
the models and the settings that decide them, with where they came from (``scripts/artifacts/controls_library.py``
writes the one shipped for the embedded Gemma, ``config.CONTROLS_NULL``).

A stored library stands in for ``--null-library DIR`` only where it was computed exactly as the run would compute
it: the same generator and target (content, precision, tokenizer), no reference model, the same passage settings
and the same reading of the texts; anything else is refused with the first difference, because a contrast computed
otherwise is not exchangeable with the book's."""

from __future__ import annotations

from pathlib import Path

from docaudit.audit.library_check import checked_profile
from docaudit.audit.synthetic_controls import BookControls
from docaudit.config import ControlsConfig
from docaudit.errors import DocauditError
from docaudit.inference.controls import block_mean
from docaudit.untrusted import load_untrusted_json

FORMAT = 4  # 2: each text's length in generator tokens; 3: passages one per stretch of --stretch-tokens; 4: after
# each text's first passage length
KIND = "controls_null"


def _model_key(lm) -> dict | None:
    return None if lm is None else {"identity": lm.identity, "precision": lm.precision, "tokenizer": lm.tokenizer_hash}


def null_key(models: dict, config: ControlsConfig, reading) -> dict:
    """What decides a text's per-passage contrasts: the generator, target and reference (``models``), the settings
    that decide the passages and suffixes (not the seed: it moves the draws, not their law) and how texts are read
    (``reading``: a ``DocumentSpec``)."""
    settings = {k: v for k, v in config.generation_key(0).items() if k != "seed"}
    return {
        "generator": _model_key(models["generator"]),
        "target": _model_key(models["target"]),
        "reference": _model_key(models.get("reference")),
        "settings": settings,
        "reading": {"raw": bool(reading.raw), "normalize_chars": bool(reading.normalize_chars)},
    }


def text_record(book: BookControls, file: str, file_sha256: str, source_sha256: str | None = None) -> dict:
    """One library text as stored: its file, the SHA-256 of the file's bytes, of the text as put through and of
    the whole text as read that it was taken from (an excerpt's book: what a judged book is matched by, so a book
    is never compared with an excerpt of itself), its length in generator tokens, its per-passage contrasts and
    cost."""
    return {
        "file": file,
        "file_sha256": file_sha256,
        "sha256": book.sha256,
        "source_sha256": source_sha256 or book.sha256,
        "passages": book.passages,
        "tokens": book.tokens,
        "contrasts": book.deltas,
        "profile": book.profile,
        "cpu_seconds": book.cost.get("cpu_seconds"),
    }


def library_document(key: dict, provenance: dict, texts: list[dict]) -> dict:
    """The stored library: its format, its key, its provenance and its texts."""
    return {"format": FORMAT, "kind": KIND, "key": key, "provenance": provenance, "texts": texts}


def _difference(stored: dict, wanted: dict) -> str | None:
    """The first part of the key that differs, in words, or None."""
    for part in ("generator", "target", "reference"):
        if stored.get(part) != wanted[part]:
            have = "none" if stored.get(part) is None else stored[part].get("identity")
            got = "none" if wanted[part] is None else f"{wanted[part]['identity']} ({wanted[part]['precision']})"
            return f"its {part} is {have} ({(stored.get(part) or {}).get('precision', '-')}), this run's {got}"
    for part in ("settings", "reading"):
        for name, value in wanted[part].items():
            if stored.get(part, {}).get(name) != value:
                have = stored.get(part, {}).get(name)
                return f"it was computed with {name.replace('_', '-')} {have}, this run uses {value}"
    return None


def refuse_other_precision(path: Path, models: dict, min_library: int) -> None:
    """Refuse in one line, before any model loads, a stored library computed with the generator or target at
    another precision or through another backend than the run's (``models``: their ``ModelConfig`` or
    ``LoadedModel`` by role), naming what to give instead; a library that cannot be read is left to
    :func:`read_library`."""
    from docaudit.query.loaded import precision_of

    try:
        key = load_untrusted_json(Path(path), "controls library")["key"]
        stored = {role: (key.get(role) or {}).get("precision") for role in ("generator", "target")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return
    for role, have in stored.items():
        m = models[role]
        wanted = precision_of(getattr(m, "config", m))
        if have != wanted:
            raise DocauditError(
                f"the stored null library {path} holds contrasts of a {have} {role}, not of this run's ({wanted}): "
                f"give --null-library DIR, a folder of at least {min_library} texts the model cannot have seen "
                "(e.g. books first published after its training data; scripts/artifacts/controls_library.py stores a "
                "library of them for reuse), or --reference MODEL"
            )


def read_library(path: Path, key: dict, block: int) -> list[BookControls]:
    """The texts of a stored library as tested texts (their statistic's blocks of ``block``), refused with one
    line when it cannot be read or was computed otherwise than ``key`` says."""
    try:
        data = load_untrusted_json(Path(path), "controls library")
        if data.get("kind") != KIND:
            raise ValueError("not a controls null library")
        if data.get("format") != FORMAT:
            raise ValueError(
                f"format {data.get('format')}, not {FORMAT}: its passages were not laid out one per stretch of "
                "--stretch-tokens after each text's first passage length, as a book's are, so no book's passages lie "
                "as its texts' do; compute it again (scripts/artifacts/controls_library.py)"
            )
        texts = data["texts"]
        tokens = [int(t["tokens"]) for t in texts]
        profiles = [checked_profile(t.get("profile"), f"text {i}") for i, t in enumerate(texts)]
        sources = [str(t.get("source_sha256", t["sha256"])) for t in texts]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise DocauditError(f"cannot read the stored null library {path}: {e}") from None
    if (why := _difference(data["key"], key)) is not None:
        raise DocauditError(
            f"the stored null library {path} does not match this run ({why}): use its settings (--preset fast) and "
            "models, or give --null-library DIR"
        )
    out = []
    for t, n, source, profile in zip(texts, tokens, sources, profiles):  # matched by the whole text it came from
        book = BookControls(t["file"], f"{path}#{t['file']}", source, int(t["passages"]), n, deltas=t["contrasts"])
        book.profile = profile
        book.contrast = block_mean(t["contrasts"], block) if len(t["contrasts"]) >= 2 * block else None
        out.append(book)
    return out
