"""What ``docaudit map`` writes and prints: a row per segment (CSV, JSON), the score along each book with the
calibration band and the flagged segments (PNG), a self-contained page, and the terminal's text."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from docaudit.audit.localize import BAND, MapResult
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE

COLUMNS = ["verdict", "reason", "file", "id", "segment", "name", "start_char", "end_char", "words", "n_scored"]
COLUMNS += ["score", "band_low", "band_high", "calibration_books", "p_value", "q_value", "text_gate_p"]


def map_frame(result: MapResult) -> pd.DataFrame:
    """The segments' rows, the verdict first."""
    frame = pd.DataFrame(list(result.rows))
    return frame[[c for c in COLUMNS if c in frame] + [c for c in frame if c not in COLUMNS]]


def map_json(result: MapResult) -> dict:
    """The JSON output (``schemas/map.schema.json``), with its envelope."""
    from docaudit.provenance import envelope

    frame = map_frame(result)
    rows = frame.astype(object).where(pd.notna(frame), None).to_dict(orient="records")
    body = {"info": result.info, "books": result.books, "rows": rows}
    return envelope("map", body, inputs=result.rows.inputs, model=result.rows.model)


def plot_map(result: MapResult, path: Path) -> None:
    """One panel per book: each segment's score as a step along the book (characters), the band of the calibration
    windows' scores (5th to 95th percentile) behind it, segment boundaries, and the segments with evidence of
    membership marked."""
    from docaudit.report.plots import _pyplot

    plt = _pyplot()
    frame = map_frame(result)
    books = list(dict.fromkeys(frame.file))
    fig, axes = plt.subplots(len(books), 1, figsize=(9, 2.6 * len(books)), squeeze=False, layout="constrained")
    for ax, book in zip(axes[:, 0], books):
        part = frame[frame.file == book]
        for _, r in part.iterrows():
            x = (r.start_char, r.end_char)
            if r.band_low is not None and pd.notna(r.band_low):
                ax.fill_between(x, r.band_low, r.band_high, color="#4c72b0", alpha=0.18, lw=0)
            if r.score is not None and pd.notna(r.score):
                color = "#c44e52" if r.verdict == EVIDENCE else "0.55" if r.verdict == INCONCLUSIVE else "black"
                ax.plot(x, (r.score, r.score), color=color, lw=2.4 if r.verdict == EVIDENCE else 1.6)
            ax.axvline(r.start_char, color="0.85", lw=0.6, zorder=0)
        title = (
            next((b["title"] for b in result.books if b["file"] == book and b.get("title")), None) or Path(book).name
        )
        ax.set_title(str(title)[:80], fontsize=9, loc="left")
        ax.set_xlabel("characters into the book", fontsize=8)
        ax.set_ylabel(result.info["method"], fontsize=8)
        ax.tick_params(labelsize=7)
    handles = [
        plt.Line2D([], [], color="#c44e52", lw=2.4, label="evidence of membership"),
        plt.Line2D([], [], color="black", lw=1.6, label="no evidence"),
        plt.Line2D([], [], color="0.55", lw=1.6, label="inconclusive"),
        plt.Rectangle((0, 0), 1, 1, color="#4c72b0", alpha=0.18, label=f"calibration windows, {BAND[0]}-{BAND[1]}%"),
    ]
    axes[0, 0].legend(handles=handles, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.12), ncol=4)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def book_line(book: dict, info: dict) -> str:
    """A book's summary: how it was cut and how many segments got each verdict."""
    counts = book["verdicts"]
    parts = [f"{counts.get(v, 0)} {v}" for v in (EVIDENCE, "no evidence of membership", INCONCLUSIVE) if counts.get(v)]
    name = f"{book['title']} ({book['id']})" if book.get("title") else book["id"]
    return (
        f"{name}: {book['segments']} segments ({book['segmented_by']}): {', '.join(parts)} "
        f"[{info['method']}, alpha {info['alpha']:g}, BH over the book's segments]"
    )


def map_text(result: MapResult) -> str:
    """The terminal's text: per book its line, then a row per segment, the verdict first."""
    frame = map_frame(result)
    out = []
    for book in result.books:
        part = frame[frame.file == book["file"]]
        table = pd.DataFrame(
            {
                "verdict": [
                    v if v != INCONCLUSIVE else f"inconclusive: {r}" for v, r in zip(part.verdict, part.reason)
                ],
                "segment": part.name.str.slice(0, 30),
                "words": part.words,
                "score": part.score.map(_number),
                "band": [_band(lo, hi) for lo, hi in zip(part.band_low, part.band_high)],
                "p": part.p_value.map(_number),
                "q": part.q_value.map(_number),
            }
        )
        out += [book_line(book, result.info), table.to_string(index=False), ""]
    return "\n".join(out).rstrip()


def _number(value) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.4g}"


def _band(lo, hi) -> str:
    return "-" if lo is None or pd.isna(lo) else f"{lo:.3g}..{hi:.3g}"


def write_map(result: MapResult, out: Path, overwrite: bool = False) -> None:
    """``map.csv``, ``map.json``, ``map.png`` and a self-contained ``map.html`` into ``out`` (a new or empty
    folder, or an earlier map with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir

    with staged_dir(Path(out), "map", overwrite) as tmp:
        write_csv(map_frame(result), tmp / "map.csv")
        (tmp / "map.json").write_text(json_text(map_json(result)), encoding="utf-8")
        plot_map(result, tmp / "map.png")
        (tmp / "map.html").write_text(render_html(result, tmp / "map.png"), encoding="utf-8")


def render_html(result: MapResult, image: Path) -> str:
    """The map's page from the package's jinja2 template, every value escaped."""
    from docaudit.report.pages import render_page
    from docaudit.report.plots import png_data_uri

    frame = map_frame(result)
    books = [
        {"line": book_line(b, result.info), "rows": frame[frame.file == b["file"]].to_dict(orient="records")}
        for b in result.books
    ]
    return render_page("map.html", books=books, info=result.info, image=png_data_uri(image), number=_number, band=_band)
