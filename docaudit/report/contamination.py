"""The files ``report`` writes: CSV, JSON, plots and a self-contained HTML page."""

from __future__ import annotations

import html
import math
from pathlib import Path

from docaudit.audit.contamination import ContaminationReport


def write_contamination_report(report: ContaminationReport, out: Path, overwrite: bool = False) -> None:
    """``report.csv``, ``calibration.csv``, ``snippets.csv``, ``report.json``, ``rates.png``, ``calibration_roc.png``,
    ``calibration_scores.png`` and a self-contained ``report.html`` (PNGs embedded) into ``out`` (a new or empty
    folder, or an earlier report with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text
    from docaudit.outputs import staged_dir
    from docaudit.report.plots import plot_histogram, plot_roc, roc_frame

    info = report.info
    with staged_dir(Path(out), "report", overwrite) as tmp:
        report.books.to_csv(tmp / "report.csv", index=False)
        report.calibration.to_csv(tmp / "calibration.csv", index=False)
        report.snippets.to_csv(tmp / "snippets.csv", index=False)
        tau = report.threshold
        (tmp / "report.json").write_text(
            json_text(
                {
                    "info": info | {"threshold": tau if math.isfinite(tau) else str(tau)},
                    "books": report.books.to_dict(orient="records"),
                }
            )
        )
        cal_mean = report.calibration.groupby("label").contamination_rate.mean()
        plot_histogram(
            report.books.contamination_rate,
            tmp / "rates.png",
            "contamination rate of the audited books",
            "share of snippets over the threshold",
            marks={f"calibration {k}s (mean)": v for k, v in cal_mean.items()},
        )
        cal = report.snippets[report.snippets.role != "audited"]
        y = (cal.role == "member").to_numpy().astype(int)
        plot_roc(
            roc_frame({"calibration snippets": (y, cal.score.to_numpy())}),
            tmp / "calibration_roc.png",
            title=f"calibration ROC ({info['method_title']}, AUC {info['calibration_auc']:.3f})",
        )
        scores = report.snippets.score
        lo, hi = float(scores.min()), float(scores.max())
        plot_histogram(
            {"members": cal.score[y == 1], "non-members": cal.score[y == 0]},
            tmp / "calibration_scores.png",
            "calibration snippet scores",
            info["method_title"],
            bins=30,
            range_=(lo, hi if hi > lo else lo + 1),
            marks={"threshold": tau} if math.isfinite(tau) else None,
        )
        (tmp / "report.html").write_text(_html(report, tmp), encoding="utf-8")


def _html(report: ContaminationReport, images: Path) -> str:
    from docaudit.report.plots import png_data_uri
    from docaudit.report.tables import format_beyond_blind, html_table

    info = report.info
    books = report.books.drop(columns=["file"]).assign(
        interval=[f"[{lo:.1%}, {hi:.1%}]" for lo, hi in zip(report.books.ci_low, report.books.ci_high)],
        contamination_rate=[f"{r:.1%}" for r in report.books.contamination_rate],
    )[["book", "contamination_rate", "interval", "n_above", "n_snippets", "mean_score"]]
    calibration = report.calibration.drop(columns=["file"])[
        ["label", "book", "contamination_rate", "ci_low", "ci_high", "n_snippets", "mean_score"]
    ]
    settings = [
        ("model", info["model_identity"]),
        ("method", info["method_title"]),
        (
            "snippets",
            f"{info['snippets_per_book']} per book of {info['snippet_words']} words (context {info['context']} "
            f"tokens; {info['snippets_over_context']} snippets longer, scored over several windows)",
        ),
        ("threshold", f"{report.threshold:.4g} ({info['threshold_rule']})"),
        (
            "calibration",
            f"{info['n_calibration_members']} member and {info['n_calibration_nonmembers']} non-member books; "
            f"snippet AUC {info['calibration_auc']:.3f}, accuracy {info['calibration_accuracy']:.1%}, "
            f"TPR {info['calibration_tpr']:.1%}, FPR {info['calibration_fpr']:.1%}",
        ),
        (
            "interval",
            f"{info['interval']} at {info['confidence']:.0%}, treating snippets as independent and the "
            "threshold as fixed",
        ),
    ]
    items = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in settings)
    warning = f'<p class="warning">{html.escape(info["warning"])}</p>' if info.get("warning") else ""
    img = lambda name, alt: f'<img alt="{alt}" src="{png_data_uri(images / name)}">'  # noqa: E731
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>docaudit contamination report</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
th{{background:#f0f0f0}}.warning{{color:#b00;font-weight:bold}}td:first-child,th:first-child{{text-align:left}}img{{max-width:48%;margin:4px}}</style>
</head><body>
<h1>Contamination rates per book</h1>
{warning}
<ul>{items}</ul>
<h2>Audited books ({info["n_books"]}), by contamination rate</h2>
{html_table(books)}
<div>{img("rates.png", "histogram of contamination rates")}{img("calibration_roc.png", "calibration ROC")}</div>
<h2>Calibration</h2>
<div>{img("calibration_scores.png", "calibration snippet scores")}</div>
{html_table(calibration)}
<p>{html.escape(format_beyond_blind(info.get("beyond_blind")))}</p>
<p>Generated by docaudit in {info["wall_seconds"]} s.</p>
</body></html>
"""
