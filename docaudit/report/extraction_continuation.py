"""What ``extract --mode continuation`` prints and writes: per book the share of its passages the model continued
with a long verbatim run, beside the never-seen texts', the longest run and the passages quoted; with ``--out``,
``extract.json`` and ``extract.csv`` (a row per passage of every text)."""

from __future__ import annotations

from pathlib import Path

from docaudit.audit.extraction_continuation import ContinuedText


def text_record(text: ContinuedText, base: dict | None = None, passages: int | None = None) -> dict:
    """A text's figures, with a book's baseline among the never-seen texts and its passages with a long match (the
    first ``passages``)."""
    doc = text.document
    record = {"file": str(doc.path), "id": doc.id, "title": doc.title, **text.summary}
    if passages is not None:
        record |= {"baseline": base, "quoted": text.quoted[:passages]}
    return record


def passage_rows(texts: list[ContinuedText]) -> list[dict]:
    """A row per passage of every text: its positions and its match figures."""
    return [
        {"file": str(t.document.path), "sha256": t.document.sha256, "role": t.role,
         **{k: v for k, v in p.items() if k != "match"}}
        for t in texts for p in t.passages
    ]  # fmt: skip


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def format_continuation(body: dict) -> str:
    """The terminal's view: per book its passages with a long match beside the never-seen texts', the longest run
    and the first quoted matches."""
    c = body["continuation"]
    lines = [
        f"extract by continuation: {c['prompt_words']}-word openings continued {c['samples']} times each, compared "
        f"with the real next {c['continuation_words']} words; a long match is a common run of at least "
        f"{c['long_match_words']} words",
        "",
    ]
    for book in body["books"]:
        line = (
            f"  long match in {book['long_matches']} of {book['passages']} passages "
            f"({_percent(book['long_match_share'])}); longest common run {book['longest_match_words']} words, "
            f"{book['longest_match_chars']} characters; mean word recall {_percent(book['mean_recall'])}"
        )
        base = book["baseline"]
        if base is None:
            line += " (no never-seen texts given: --null-library, so no baseline)"
        else:
            line += (
                f" (never-seen texts: median {_percent(base['median_share'])}, max {_percent(base['max_share'])}; "
                f"{base['at_or_above']} of {base['texts']} at or above the book, rank {base['rank']})"
            )
        lines += [f"{book['title'] or book['id']} ({book['file']})", line]
        for passage in book["quoted"][:3]:
            quoted = passage["match"] if len(passage["match"]) <= 160 else passage["match"][:157] + "..."
            lines.append(f'  [{passage["continuation_start"]:,}-{passage["char_end"]:,}] "{quoted}"')
        lines.append("")
    writer = body["writer"]
    sent = (
        "written by the model run here"
        if writer["endpoint"] == "in-process"
        else f"{writer['requests']:,} requests sent"
    )
    lines.append(f"{sent}, {writer['cached']:,} answers read from the cache")
    return "\n".join(lines).rstrip()


def write_continuation(body: dict, rows: list[dict], out: Path, overwrite: bool) -> None:
    """``extract.json`` (``body``, with its envelope) and ``extract.csv`` (``rows``) into ``out``, written whole or
    not at all."""
    import pandas as pd

    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir

    with staged_dir(Path(out), "extract", overwrite) as tmp:
        (tmp / "extract.json").write_text(json_text(body), encoding="utf-8")
        write_csv(pd.DataFrame(rows), tmp / "extract.csv")
