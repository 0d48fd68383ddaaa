"""The files ``report`` writes: CSV, JSON, plots and a self-contained HTML page."""

from __future__ import annotations

import math
from pathlib import Path

from docaudit.audit.contamination import ContaminationReport
from docaudit.corpus.metadata import display_name


def report_document(report: ContaminationReport) -> dict:
    """What ``report.json`` holds after its envelope: the run's information (the threshold as text when not
    finite), the audited books (verdict first) and the calibration books."""
    tau = report.threshold
    return {
        "info": report.info | {"threshold": tau if math.isfinite(tau) else str(tau)},
        "books": verdict_first(report.books).to_dict(orient="records"),
        "calibration": report.calibration.to_dict(orient="records"),
    }


def write_contamination_report(
    report: ContaminationReport, out: Path, overwrite: bool = False, document: dict | None = None
) -> None:
    """``report.csv``, ``calibration.csv``, ``snippets.csv``, ``report.json`` (``document``, the report's JSON
    output; None: made here), ``rates.png`` (the audited books beside the calibration books),
    ``calibration_roc.png``, ``calibration_scores.png`` and a self-contained ``report.html`` (PNGs embedded) into
    ``out`` (a new or empty folder, or an earlier report with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir
    from docaudit.provenance import envelope
    from docaudit.report.plots import plot_histogram, plot_rate_strip, plot_roc, roc_frame

    info = report.info
    books = verdict_first(report.books)
    document = envelope("report", report_document(report)) if document is None else document
    with staged_dir(Path(out), "report", overwrite) as tmp:
        write_csv(flat(books), tmp / "report.csv")
        write_csv(report.calibration, tmp / "calibration.csv")
        write_csv(report.snippets, tmp / "snippets.csv")
        tau = report.threshold
        (tmp / "report.json").write_text(json_text(document))
        plot_rate_strip(report.books, report.calibration, tmp / "rates.png", info["method_title"])
        cal = report.snippets[report.snippets.role != "audited"]
        y = (cal.role == "member").to_numpy().astype(int)
        plot_roc(
            roc_frame({"calibration snippets": (y, cal.score.to_numpy())}),
            tmp / "calibration_roc.png",
            title=f"calibration ROC ({info['method_title']})",
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
        (tmp / "report.html").write_text(render_html(report, tmp), encoding="utf-8")


def flat(books):
    """The audited books' table as CSV holds it: the reason codes joined by ``;``, the reasons' sentences with their
    next steps left to the JSON (the ``reason`` column holds the sentences)."""
    out = books.drop(columns=["reasons"], errors="ignore")
    if "reason_codes" in out:
        out = out.assign(reason_codes=[";".join(codes) for codes in out.reason_codes])
    return out


def verdict_first(books):
    """The audited books' table with the verdict and its reason(s) as the first columns (report.csv, the JSON rows,
    ``--format csv``): what a reader looks for first, before the numbers it rests on."""
    first = [c for c in books.columns if c == "verdict"] + [c for c in books.columns if c.startswith("reason")]
    return books[first + [c for c in books.columns if c not in first]]


def report_warnings(info: dict) -> list[str]:
    """Every warning of a contamination report, most important first."""
    keys = ("warning", "threshold_warning", "blind_warning", "overlap_warning")
    return [info[k] for k in keys if info.get(k)]


def percent(value: float) -> str:
    return f"{value:.1%}"


def interval(lo: float, hi: float) -> str:
    return f"{lo:.1%} – {hi:.1%}"


def reference_ranges(calibration) -> str:
    """One sentence on the calibration books' rates: the reference a book's rate is read against."""
    parts = []
    for role, name in (("non-member", "known non-members"), ("member", "known members")):
        rates = calibration.contamination_rate[calibration.label == role]
        if len(rates):
            parts.append(
                f"the {len(rates)} {name} score {percent(rates.min())} to {percent(rates.max())} "
                f"(median {percent(rates.median())})"
            )
    return "; ".join(parts).capitalize() + "."


def format_book_rates(books, confidence: float) -> str:
    """The audited books for the terminal: snippets, contamination rate, book-level and Wilson intervals."""
    import pandas as pd

    level = f"{confidence:.0%}"
    shown = pd.DataFrame(
        {
            "book": books.book,
            "snippets": books.n_snippets,
            "rate": books.contamination_rate.map(percent),
            f"book-level {level}": [interval(lo, hi) for lo, hi in zip(books.book_ci_low, books.book_ci_high)],
            f"Wilson {level}": [interval(lo, hi) for lo, hi in zip(books.ci_low, books.ci_high)],
        }
    )
    return shown.to_string(index=False)


def _books_table(frame, confidence: float, label: bool = False) -> dict:
    level = f"{confidence:.0%}"
    headers = [
        *(["Class"] if label else []),
        "Book",
        "Contamination rate",
        *([f"Debiased fraction ({level} interval)"] if "debiased_fraction" in frame else []),
        *([f"Book-level {level} interval"] if "book_ci_low" in frame else []),
        f"Wilson {level} interval (snippets independent)",
        "Snippets over threshold",
        "Words",
        "Snippets overlap",
        "Mean snippet score",
    ]
    rows = []
    for r in frame.itertuples(index=False):
        rows.append(
            [
                *([r.label] if label else []),
                display_name(r.book, getattr(r, "title", None), getattr(r, "author", None)),
                percent(r.contamination_rate),
                *([debiased_cell(r)] if "debiased_fraction" in frame else []),
                *([interval(r.book_ci_low, r.book_ci_high)] if "book_ci_low" in frame else []),
                interval(r.ci_low, r.ci_high),
                f"{r.n_above} of {r.n_snippets}",
                f"{r.n_words:,}",
                "yes" if r.snippets_overlap else "no",
                f"{r.mean_score:.3f}",
            ]
        )
    return {"headers": headers, "rows": rows, "text": {0, 1} if label else {0}}


def debiased_cell(row) -> str:
    """A book's debiased fraction with its interval, or why there is none."""
    value = row.debiased_fraction
    if value is None or value != value:
        return "n/a (no verdict: see the reason)"
    return f"{percent(value)} ({interval(row.debiased_ci_low, row.debiased_ci_high)})"


def verdict_items(books) -> list[dict]:
    """Per audited book: its verdict line, then the numbers it rests on."""
    from docaudit.report.verdicts import verdict_line

    def num(v):
        return "n/a" if v is None or v != v else f"{v:.3g}"

    return [
        {
            "book": display_name(r.book, getattr(r, "title", None), getattr(r, "author", None)),
            "line": verdict_line(r._asdict()),
            "numbers": f"p-value {num(r.p_value)} (rate compared at {num(r.n_compared)} snippets), q-value "
            f"{num(r.q_value)}, blind p-value {num(r.p_value_blind)}; contamination rate "
            f"{percent(r.contamination_rate)}, debiased fraction {debiased_cell(r)}",
        }
        for r in books.itertuples(index=False)
    ]


def verdict_summary(info: dict) -> str:
    """How the page's verdicts were reached, in one paragraph."""
    from docaudit.report.verdicts import report_level

    v = info["verdicts"]
    several = (
        f" The {v['n_methods']} methods of this run each decide at {v['alpha']:g} / {v['n_methods']}, so the books "
        f"with evidence under any of them have a false discovery rate of at most {v['alpha']:g}."
        if v.get("n_methods", 1) > 1
        else ""
    )
    return (
        f"Each book's p-value ranks its contamination rate among the {v['n_known_nonmembers']} calibration "
        "non-members' rates, each recomputed from as many of its snippets as the book has (the smallest attainable "
        f"is {v['smallest_p']:.3g}; a book with fewer than {v['min_snippets']} snippets is inconclusive); evidence "
        f"of membership when the Benjamini–Yekutieli q-value over the {info['n_books']} audited books is below "
        f"{report_level(v)} and the blind baseline does not already separate the book (its p-value at least "
        f"{v['blind_gate_level']:g}).{several} The debiased fraction is (rate − FPR) / (TPR − FPR) with TPR "
        f"{percent(v['tpr'])} and FPR {percent(v['fpr'])} at the threshold, shown only for a book with a verdict; "
        "its interval is a prediction interval that counts the book's own false-positive rate, drawn like a "
        "calibration non-member book's at the book's snippet count, among its unknowns (with fewer than "
        f"{v['debiased_edge_books']} calibration books of a kind it reaches 0 or 1)."
    )


def render_html(report: ContaminationReport, images: Path) -> str:
    """The report page, from the package's jinja2 template with every value escaped."""
    from docaudit.report.pages import render_page
    from docaudit.report.plots import png_data_uri
    from docaudit.report.tables import beyond_blind_sentence

    info = report.info
    prov = info["provenance"]
    blind = (
        f"Blind baseline (no model) on the calibration books: AUC {info['blind_auc']:.3f} ({info['blind_kind']}), "
        f"against a book-level AUC of {info['calibration_book_auc']:.3f} for the mean snippet score. "
        "Near 0.5 is what it should be: a high value means the calibration sets differ by era, topic or "
        "formatting, and the rates reflect that difference as much as membership."
        if info.get("blind_auc") is not None
        else "Blind baseline on the calibration books: not computed (each calibration set needs at least 2 books)."
    )
    settings = [
        ("Method", info["method_title"]),
        (
            "Snippets",
            f"{info['snippets_per_book']} per book, {info['snippet_words']} words each (scored in one window of up to "
            f"{info['context']} tokens; {info['snippets_over_context']} longer snippets scored over several windows)",
        ),
        ("Threshold", f"{report.threshold:.4g} ({info['threshold_rule']})"),
        ("Seed", str(info["seed"])),
        ("Wilson interval", f"{info['confidence']:.0%}, treating snippets as independent and the threshold as fixed"),
        ("Book-level interval", f"{info['confidence']:.0%}, {info['book_interval']}"),
        ("Wall time", f"{info['wall_seconds']} s"),
    ]
    provenance = [
        ("docaudit", prov["docaudit_version"]),
        ("Created (UTC)", prov["created"]),
        ("Model", prov["model_identity"]),
        ("Tokenizer hash", prov["tokenizer"]),
        ("Command", prov["command"]),
    ]
    return render_page(
        "contamination.html",
        n_books=info["n_books"],
        method=info["method_title"],
        model=info["model_identity"],
        warnings=report_warnings(info),
        verdicts=verdict_items(report.books),
        verdict_summary=verdict_summary(info),
        reference=reference_ranges(report.calibration),
        snippets_per_book=info["snippets_per_book"],
        blind_auc=None if info.get("blind_auc") is None else f"{info['blind_auc']:.3f}",
        books=_books_table(report.books, info["confidence"]),
        calibration=_books_table(report.calibration, info["confidence"], label=True),
        calibration_summary=(
            f"{info['n_calibration_members']} member and {info['n_calibration_nonmembers']} non-member books. "
            f"Snippets: AUC {info['calibration_auc']:.3f}; at the threshold, accuracy "
            f"{percent(info['calibration_accuracy'])}, true-positive rate {percent(info['calibration_tpr'])}, "
            f"false-positive rate {percent(info['calibration_fpr'])}."
        ),
        blind_summary=blind,
        beyond=beyond_blind_sentence(info.get("beyond_blind")),
        images={
            "strip": png_data_uri(images / "rates.png"),
            "roc": png_data_uri(images / "calibration_roc.png"),
            "scores": png_data_uri(images / "calibration_scores.png"),
        },
        settings=settings,
        provenance=provenance,
    )
