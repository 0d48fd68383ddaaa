"""What ``docaudit controls`` prints: per book the verdict line first, then the contrast with its interval, the
placebo and the cost; as rows for JSON and CSV; and, with ``--out``, the same as files and an HTML page."""

from __future__ import annotations

from pathlib import Path

from docaudit.inference.verdicts import BLIND_GATE_LEVEL, EVIDENCE, INCONCLUSIVE
from docaudit.report.verdicts import _num, own_reasons, shared_reasons


def controls_rows(result: dict) -> list[dict]:
    """One flat row per judged book: verdict (with its reasons' codes and next steps), p and q with the smallest p
    the library allows and what the book was ranked at, the contrast (bits per byte) with its 95% interval, the
    placebo's, the target's and the reference's own contrasts, passages and cost (``library_texts``: the library
    texts long enough to hold the book's layout, the ones it is ranked among; ``library_eligible``: the library's
    texts other than the book)."""
    rows = []
    for book, verdict in zip(result["books"], result["verdicts"]):
        low, high = book.interval or (None, None)
        rows.append(
            {
                "file": book.path,
                "id": book.id,
                "sha256": book.sha256,
                "verdict": verdict.verdict,
                "reason": verdict.reason,
                "reason_codes": ";".join(verdict.reason_codes),
                "reasons": verdict.as_dict()["reasons"],
                "p_value": verdict.p_value,
                "q_value": verdict.q_value,
                "smallest_p": book.smallest_p,
                "library_texts": book.library_texts,
                "library_eligible": book.library_eligible,
                "p_value_blind": book.p_value_blind,
                "compared_passages": book.compared_passages,
                "contrast": None if book.contrast is None else book.contrast.mean,
                "contrast_ci_low": low,
                "contrast_ci_high": high,
                "placebo": None if book.placebo is None else book.placebo.mean,
                "target_contrast": book.target_contrast,
                "reference_contrast": book.reference_contrast,
                "passages": book.passages,
                "tokens_generated": book.cost.get("tokens_generated"),
                "tokens_scored": book.cost.get("tokens_scored"),
                "cpu_seconds": book.cost.get("cpu_seconds"),
            }
        )
    return rows


def csv_frame(rows: list[dict]):
    """The rows as CSV holds them: the reasons' sentences with their next steps left to the JSON (``reason`` holds
    the sentences, ``reason_codes`` their codes)."""
    import pandas as pd

    return pd.DataFrame(rows).drop(columns=["reasons"])


def controls_json(result: dict) -> dict:
    """The JSON output: the null used, the settings, the per-book rows and the library's statistics."""
    library = result["library"]
    return {
        "null": result["null"],
        "settings": result["settings"],
        "generator": result["generator"],
        "reference": result["reference"],
        "books": controls_rows(result),
        "library": None if library is None else [b.as_json() for b in library],
        "skipped": result["skipped"],
    }


def format_controls(result: dict) -> str:
    """The terminal's view: the null in words, the reasons every book shares (with their next steps), then per
    book its file, verdict line with its own reasons' next steps, and its numbers."""
    rows = controls_rows(result)
    lines = [f"null: {result['null']}", f"alpha {result['settings']['alpha']:g} after Benjamini-Hochberg", ""]
    shared = shared_reasons(rows)
    for reason in shared:
        lines += [f"every book: inconclusive: {reason['text']}", f"  next step: {reason['next_step']}"]
    lines += [""] if shared else []
    for row in rows:
        lines += [row["file"], *own_reasons(row, shared)]
        if row["contrast"] is not None:
            lines.append(
                f"  p_value {_num(row['p_value'])}  q_value {_num(row['q_value'])}  contrast {row['contrast']:+.4f} "
                f"bits/byte (95% {_num(row['contrast_ci_low'], '+.4f')} to {_num(row['contrast_ci_high'], '+.4f')})  "
                f"placebo {row['placebo']:+.4f}  passages {row['passages']}"
            )
        if row["smallest_p"] is not None:
            lines.append(
                f"  ranked among {row['library_texts']} never-seen texts at {_num(row['compared_passages'])} "
                f"passages laid out as the book's (of the library's {_num(row['library_eligible'])}, those long "
                f"enough to hold them): smallest attainable p-value {row['smallest_p']:.3g}"
            )
        if row.get("p_value_blind") is not None:
            lines.append(
                f"  the library checked against the book by text alone: p_value_blind {row['p_value_blind']:.3g} "
                f"(below {BLIND_GATE_LEVEL:g} would make the book inconclusive)"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def render_html(result: dict) -> str:
    """The page of the run: the null, and per book its verdict, contrast with its 95% interval, p, q and placebo
    (every value escaped: the books' names are the user's)."""
    from docaudit.report.pages import render_page

    rows = [
        {
            "id": r["id"],
            "verdict": r["verdict"],
            "reason": r["reason"],
            "css": {EVIDENCE: "evidence", INCONCLUSIVE: "inconclusive"}.get(r["verdict"], ""),
            "contrast": _num(r["contrast"], "+.4f"),
            "interval": f"{_num(r['contrast_ci_low'], '+.4f')} to {_num(r['contrast_ci_high'], '+.4f')}",
            "p_value": _num(r["p_value"]),
            "q_value": _num(r["q_value"]),
            "placebo": _num(r["placebo"], "+.4f"),
            "passages": r["passages"],
        }
        for r in controls_rows(result)
    ]
    roles = (("target", result["model"]), ("generator", result["generator"]), ("reference", result["reference"]))
    models = [(role, f"{m['id']} ({m['identity']})") for role, m in roles if m is not None]
    return render_page("controls.html", rows=rows, null=result["null"], settings=result["settings"], models=models)


def write_controls(result: dict, out: Path, overwrite: bool = False) -> None:
    """``controls.json``, ``controls.csv`` and a self-contained ``controls.html`` into ``out`` (a new or empty
    folder, or an earlier controls output with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir

    with staged_dir(Path(out), "controls", overwrite) as tmp:
        (tmp / "controls.json").write_text(json_text(controls_json(result)), encoding="utf-8")
        write_csv(csv_frame(controls_rows(result)), tmp / "controls.csv")
        (tmp / "controls.html").write_text(render_html(result), encoding="utf-8")
