"""The files ``sequence`` writes: the metrics table and the per-sample scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from docaudit.audit.sequence_level import sequence_json


def samples_jsonl(samples: pd.DataFrame) -> str:
    """One JSON object per sample (NaN as null), in order."""
    from docaudit.io import json_text

    return "".join(json_text(row, indent=None) + "\n" for row in samples.to_dict(orient="records"))


def write_sequence_evaluation(result: dict, out: Path, overwrite: bool = False) -> None:
    """``sequence_metrics.csv``, ``sequence_metrics.json`` (metrics and run information), ``samples.csv`` and
    ``samples.jsonl`` (every text's id, label, group and scores) into ``out`` (a new or empty folder, or an earlier
    sequence evaluation with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir
    from docaudit.provenance import envelope

    with staged_dir(Path(out), "sequence", overwrite) as tmp:
        write_csv(result["metrics"], tmp / "sequence_metrics.csv")
        (tmp / "sequence_metrics.json").write_text(json_text(envelope("sequence", sequence_json(result))))
        write_csv(result["samples"], tmp / "samples.csv")
        (tmp / "samples.jsonl").write_text(samples_jsonl(result["samples"]))
