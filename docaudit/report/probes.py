"""What ``docaudit probe`` prints: the null in words, then per book the verdict line and its numbers (the
statistic, the passage count it was compared at, p and q, the smallest p the library allows, the cost); as rows
for JSON and CSV; and, with ``--out``, ``probe.json`` and ``probe.csv``."""

from __future__ import annotations

from pathlib import Path

from docaudit.report.verdicts import _num, verdict_line


def probe_rows(result: dict) -> list[dict]:
    """One flat row per judged book."""
    rows = []
    for book, verdict in zip(result["books"], result["verdicts"]):
        rows.append(
            {
                "file": book.path,
                "id": book.id,
                "name": book.name,
                "sha256": book.sha256,
                "verdict": verdict.verdict,
                "reason": verdict.reason,
                "reason_codes": list(verdict.reason_codes),
                "reasons": [{"code": r.code, "text": r.text, "next_step": r.next_step} for r in verdict.reasons],
                "p_value": verdict.p_value,
                "q_value": verdict.q_value,
                "smallest_p": result["smallest_p"],
                "statistic": book.statistic,
                "values": list(book.values),
                "passages": len(book.values),
                "compared_at": book.compared_at,
                "library_texts": book.library_texts,
                "p_value_blind": book.p_value_blind,
                "unreadable": book.unreadable,
                "requests": book.cost.get("requests"),
                "cached": book.cost.get("cached"),
                "tokens_sent": book.cost.get("tokens_sent"),
                "tokens_received": book.cost.get("tokens_received"),
                "seconds": book.cost.get("seconds"),
            }
        )
    return rows


def probe_json(result: dict) -> dict:
    """The JSON output: the probe, the null in words, the smallest attainable p-value, the settings, the model,
    the per-book rows and the library's statistics."""
    library = result["library"]
    return {
        "probe": result["settings"]["probe"],
        "null": result["null"],
        "smallest_p": result["smallest_p"],
        "settings": result["settings"],
        "writer": result["writer"],
        "books": probe_rows(result),
        "library": None if library is None else [t.as_json() for t in library],
        "skipped": result["skipped"],
    }


def format_probe(result: dict) -> str:
    """The terminal's view: the null, then per book its file, verdict line, numbers and next step."""
    settings = result["settings"]
    smallest = result["smallest_p"]
    lines = [
        f"probe {settings['probe']} of {result['writer']['identity']}",
        result["null"],
        f"alpha {settings['alpha']:g} after Benjamini-Hochberg"
        + ("" if smallest is None else f"; smallest attainable p-value {smallest:.3g} (1 / (library texts + 1))"),
        "",
    ]
    for row in probe_rows(result):
        lines += [f"{row['name']} ({row['file']})", f"  {verdict_line(row)}"]
        compared = row["compared_at"] or "n/a"
        lines.append(
            f"  statistic {_num(row['statistic'])}  passages {row['passages']}  compared at {compared} with "
            f"{row['library_texts'] if row['library_texts'] is not None else 'n/a'} library texts  "
            f"p_value {_num(row['p_value'])}  q_value {_num(row['q_value'])}  p_value_blind "
            f"{_num(row['p_value_blind'])}  requests {row['requests']} (cached {row['cached']})"
        )
        lines += [f"  next: {r['next_step']}" for r in row["reasons"]]
        lines.append("")
    return "\n".join(lines).rstrip()


def write_probe(result: dict, out: Path, overwrite: bool = False) -> None:
    """``probe.json`` and ``probe.csv`` into ``out`` (a new or empty folder, or an earlier probe output with
    ``overwrite``), written whole or not at all."""
    import pandas as pd

    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir

    with staged_dir(Path(out), "probe", overwrite) as tmp:
        (tmp / "probe.json").write_text(json_text(probe_json(result)), encoding="utf-8")
        write_csv(pd.DataFrame(probe_rows(result)).drop(columns=["reasons", "values"]), tmp / "probe.csv")
