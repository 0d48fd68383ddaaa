"""What ``docaudit extract`` prints and writes: per book the extractable share beside what never-seen texts reach,
the longest extractable run, the largest p_z and the passages quoted; a row per example (CSV, JSON); with
``--out``, ``extract.json``, ``extract.csv``, ``extract.png`` (max p_z along each book, chapters marked) and
``extract.html``.

A log p_z of −inf (p_z = 0: a suffix token outside the top k, or not an argmax for greedy) is written as null beside
a flag, since docaudit's JSON holds no infinity."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from docaudit.audit.extraction import TextExtraction, discoverable
from docaudit.config import LocalizeConfig

PLOT_BINS = 400  # points along a book in the plot: the largest p_z of the examples in each


def _log(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def example_rows(text: TextExtraction, settings: dict) -> list[dict]:
    """One row per example of a text: where its suffix lies (tokens and characters), log p_z greedy and sampled
    (null and ``*_zero`` true where p_z is 0; null and ``unknown`` true where a server could not be asked for the
    example's exact tokens) and whether it is discoverable and greedy-extractable."""
    prefix, suffix = settings["prefix_tokens"], settings["suffix_tokens"]
    found = discoverable(text.pz.sampled, settings["n"], settings["p"])
    rows = []
    for i, start in enumerate(text.starts.tolist()):
        lo, hi = start + prefix, start + prefix + suffix
        greedy, sampled = text.pz.greedy[i], text.pz.sampled[i]
        rows.append(
            {
                "file": text.document.path,
                "role": text.role,
                "example": i,
                "token_start": start,
                "suffix_token_start": lo,
                "suffix_char_start": int(text.offsets[lo, 0]),
                "suffix_char_end": int(text.offsets[hi - 1, 1]),
                "log_pz_greedy": _log(greedy),
                "greedy_zero": bool(np.isneginf(greedy)),
                "log_pz": _log(sampled),
                "pz_zero": bool(np.isneginf(sampled)),
                "pz": None if np.isnan(sampled) else float(np.exp(sampled)),
                "unknown": bool(np.isnan(sampled)),
                "discoverable": bool(found[i]),
                "greedy_extractable": bool(np.isfinite(greedy)),
            }
        )
    return rows


def book_record(text: TextExtraction, base: dict | None) -> dict:
    """A book's figures, its baseline among the never-seen texts and its passages."""
    doc = text.document
    return {
        "file": doc.path,
        "id": doc.id,
        "title": doc.title,
        "sha256": doc.sha256,
        **text.summary,
        "baseline": base,
        "passages": text.passages,
    }


def library_record(text: TextExtraction) -> dict:
    doc = text.document
    return {"file": doc.path, "sha256": doc.sha256, **text.summary}


def _percent(share: float) -> str:
    return f"{100 * share:.2f}%"


def headline(book: dict, settings: dict) -> str:
    """The book's line in words: its extractable share at (n, p), and what the never-seen texts reach."""
    line = (
        f"extractable share {_percent(book['extractable_share'])} of {book['tokens']:,} tokens "
        f"((n, p) = ({settings['n']}, {settings['p']:g}), top-{settings['top_k']}); "
        f"greedy {_percent(book['greedy_share'])}"
    )
    base = book["baseline"]
    if base is None:
        return line + " (no never-seen texts given: --null-library, so no baseline)"
    which = "never-seen texts of the stored library" if base.get("source") == "stored" else "never-seen texts"
    return line + (
        f" ({which}: median {_percent(base['median_share'])}, max {_percent(base['max_share'])}; "
        f"{base['at_or_above']} of {base['texts']} at or above the book)"
    )


def format_extract(body: dict) -> str:
    """The terminal's view: per book its headline, the longest run, the largest p_z and the first passages."""
    settings = body["settings"]
    lines = [
        f"extract: {settings['prefix_tokens']}-token prefixes, {settings['suffix_tokens']}-token suffixes every "
        f"{settings['stride']} tokens; p_z under greedy decoding and top-{settings['top_k']} sampling at temperature "
        f"{settings['temperature']:g}",
        "",
    ]
    for book in body["books"]:
        lines += [f"{book['title'] or book['id']} ({book['file']})", f"  {headline(book, settings)}"]
        run = book["longest_run"]
        lines.append(
            f"  longest extractable run {book['longest_run_tokens']} tokens"
            + ("" if run is None else f" (characters {run['char_start']:,}-{run['char_end']:,})")
            + f"; largest p_z {book['max_pz']:.3g} (greedy {book['max_pz_greedy']:.3g}); {book['examples']:,} examples"
            + (f" ({book['unknown_examples']:,} left out: their text does not tokenize back to their tokens, so the "
               "server could not be asked for them)" if book.get("unknown_examples") else "")
        )  # fmt: skip
        for passage in book["passages"][:3]:
            quoted = " ".join(passage["text"].split())
            quoted = quoted if len(quoted) <= 160 else quoted[:157] + "..."
            lines.append(f'  [{passage["char_start"]:,}-{passage["char_end"]:,}] "{quoted}"')
        lines.append("")
    about = body.get("baseline") or {}
    if about.get("source") == "stored":
        what = (about.get("provenance") or "").split(";")[0]  # its first clause: what the texts are
        lines.append(f"baseline: {about['texts']} never-seen texts stored in {about['path']}" + (what and f": {what}"))
    elif about.get("why"):
        lines.append(f"no baseline: {about['why']}")
    return "\n".join(lines).rstrip()


def along(text: TextExtraction, settings: dict) -> tuple[np.ndarray, np.ndarray]:
    """The largest log10 p_z of the examples in each of up to ``PLOT_BINS`` stretches of a text, at the character
    where each stretch's first suffix starts (−inf where every p_z is 0)."""
    rows = np.array([int(text.offsets[s + settings["prefix_tokens"], 0]) for s in text.starts], dtype=np.int64)
    bins = np.array_split(np.arange(len(rows)), min(PLOT_BINS, len(rows)))
    x = np.array([rows[b[0]] for b in bins])
    known = np.where(np.isnan(text.pz.sampled), -np.inf, text.pz.sampled)  # an unknown p_z is not drawn
    y = np.array([known[b].max() for b in bins]) / np.log(10)
    return x, y


def plot_extract(texts: list[TextExtraction], settings: dict, path: Path) -> None:
    """One panel per book: the largest log10 p_z along it (top-k sampling; stretches where every p_z is 0 as ticks
    on the panel's floor), the discoverability threshold (dashed), and the chapters ``map`` finds marked."""
    from docaudit.corpus.segments import chapter_segments
    from docaudit.report.plots import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(len(texts), 1, figsize=(9, 2.4 * len(texts)), squeeze=False, layout="constrained")
    threshold = np.log10(-np.expm1(np.log1p(-settings["p"]) / settings["n"]))  # the smallest discoverable p_z
    for ax, text in zip(axes[:, 0], texts):
        x, y = along(text, settings)
        floor = min(threshold, np.min(y[np.isfinite(y)], initial=threshold)) - 1
        seen = np.isfinite(y)
        ax.plot(x, np.where(seen, y, np.nan), color="black", lw=0.9, marker=".", ms=2)
        ax.plot(x[~seen], np.full((~seen).sum(), floor), "|", color="0.6", ms=4)
        ax.axhline(threshold, color="#c44e52", lw=1, ls="--")
        ax.set_ylim(floor - 0.5, max(threshold, np.max(y[seen], initial=threshold)) + 0.5)
        ticks = [t for t in ax.get_yticks() if floor < t <= 0]
        ax.set_yticks([floor, *ticks], ["p_z = 0", *(f"{t:g}" for t in ticks)])
        for segment in chapter_segments(text.document.text, LocalizeConfig().min_segment_words) or []:
            ax.axvline(segment.start, color="0.8", lw=0.6, zorder=0)
        ax.set_title(str(text.document.title or Path(text.document.path).name)[:80], fontsize=9, loc="left")
        ax.set_xlabel("characters into the book (chapters marked)", fontsize=8)
        ax.set_ylabel("max log10 p_z", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_html(body: dict, image: Path) -> str:
    """The page from the package's jinja2 template, every value escaped."""
    from docaudit.report.pages import render_page
    from docaudit.report.plots import png_data_uri

    books = [{"line": headline(b, body["settings"]), **b} for b in body["books"]]
    return render_page("extract.html", books=books, settings=body["settings"], image=png_data_uri(image))


def write_extract(body: dict, rows: list[dict], texts: list[TextExtraction], out: Path, overwrite: bool) -> None:
    """``extract.json`` (``body``, with its envelope), ``extract.csv`` (``rows``), ``extract.png`` and
    ``extract.html`` into ``out`` (a new or empty folder, or an earlier extract output with ``overwrite``),
    written whole or not at all."""
    import pandas as pd

    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir

    with staged_dir(Path(out), "extract", overwrite) as tmp:
        (tmp / "extract.json").write_text(json_text(body), encoding="utf-8")
        write_csv(pd.DataFrame(rows), tmp / "extract.csv")
        plot_extract(texts, body["settings"], tmp / "extract.png")
        (tmp / "extract.html").write_text(render_html(body, tmp / "extract.png"), encoding="utf-8")
