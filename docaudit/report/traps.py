"""Writing what the trap commands produce: the trapped copies with their private registry, and the detection table."""

from __future__ import annotations

from pathlib import Path

from docaudit.audit.traps import TrapDetection, TrapPlan
from docaudit.corpus.traps import REGISTRY_FORMAT
from docaudit.errors import DocauditError
from docaudit.io import atomic_write_text
from docaudit.outputs import staged_dir
from docaudit.untrusted import load_untrusted_json, sha256_untrusted


def check_registry_path(registry: Path, out: Path, overwrite: bool) -> Path:
    """Refuse a registry path inside the output folder (it would be published with it), an existing file that is not
    a registry, and an existing registry unless ``overwrite``."""
    registry, out = Path(registry).expanduser().resolve(), Path(out).expanduser().resolve()
    if registry == out or out in registry.parents:
        raise DocauditError(f"the registry {registry} must not be inside --out {out}: the registry is private")
    if registry.is_dir():
        raise DocauditError(f"registry {registry} is a folder; name a file")
    if registry.exists():
        try:
            fmt = load_untrusted_json(registry, "registry").get("format")
        except (OSError, ValueError, UnicodeDecodeError, AttributeError, RecursionError):
            fmt = None
        if fmt != REGISTRY_FORMAT:
            raise DocauditError(f"{registry} exists and is not a docaudit trap registry; choose another file")
        if not overwrite:
            raise DocauditError(f"registry {registry} exists; pass --overwrite to replace it")
    if not registry.parent.is_dir():
        raise DocauditError(f"registry {registry}: folder {registry.parent} does not exist")
    return registry


def write_trapped(plan: TrapPlan, out: Path, registry: Path, overwrite: bool, inputs) -> None:
    """Write the trapped copies to ``out`` (a new or empty folder, or an earlier trap output with ``overwrite``; all
    or nothing) and the registry to ``registry``, after checking that every output's bytes hash to what the
    registry records."""
    with staged_dir(out, "traps", overwrite, inputs) as tmp:
        for entry in plan.registry.documents:
            path = tmp / entry.output
            atomic_write_text(path, plan.texts[entry.output])
            if sha256_untrusted(path, "document") != entry.output_sha256:
                raise DocauditError(f"{entry.output}: written bytes differ from the text planted")
        plan.registry.write(registry)


def planted_rows(plan: TrapPlan, out: Path) -> list[dict]:
    """One row per trapped copy written to ``out``: its file and hash, its traps, their copies and its controls."""
    return [
        {
            "document": d.id,
            "output": str(Path(out) / d.output),
            "output_sha256": d.output_sha256,
            "traps": len(d.traps),
            "copies": len(d.traps[0].positions),
            "controls": len(d.controls),
        }
        for d in plan.registry.documents
    ]


def detection_table(result: TrapDetection) -> list[dict]:
    """One row per document, then the pooled row."""
    return [*result.rows, result.overall]


def format_detection(result: TrapDetection) -> str:
    """The table for people, with what the p-value tests."""
    import pandas as pd

    table = pd.DataFrame(detection_table(result)).drop(columns=["reason"])
    lines = [
        table.to_string(index=False, float_format=lambda v: f"{v:.3g}"),
        "",
        f"AUC: traps vs controls (0.5: the model treats them alike). p_value: one-sided Mann-Whitney test of "
        f"'traps score higher' on the {result.primary} score; the published half of each document's sequences was "
        "chosen at random, so when the model never saw the traps p < 0.05 happens at most 5% of the time. "
        "q_value: Benjamini-Hochberg over the documents.",
    ]
    for row in result.rows:
        if row["reason"]:
            lines.append(f"{row['document']}: inconclusive, {row['reason']}")
    return "\n".join(lines)
