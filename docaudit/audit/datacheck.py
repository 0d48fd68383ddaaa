"""Statistics of two document sets, without any model: lengths, dates, leftover boilerplate, character conventions,
and the blind baseline with its warning. Behind ``docaudit data check DIR_A DIR_B``.

Set A plays the members (label 1) and set B the non-members (label 0) for the blind baseline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from docaudit.config.rules import check_folds
from docaudit.corpus.documents import Document, duplicates_note, separate_sets
from docaudit.methods.blind import (
    DEFAULT_MAX_CHARS,
    KINDS,
    MODERN_YEAR,
    evaluate_blind,
    shift_warning,
    years_mentioned,
)
from docaudit.metrics import chunk_folds, tpr_unavailable
from docaudit.untrusted import read_untrusted

# lines that still look like Project Gutenberg or production boilerplate
BOILERPLATE_PATTERNS: dict[str, re.Pattern] = {
    "project_gutenberg": re.compile(r"project\s+gutenberg|gutenberg\.(?:org|net)", re.I),
    "produced_by": re.compile(r"\b(?:Produced|E-?text\s+prepared|Transcribed\s+from)\s+(?:by|from)?\b"),
    "transcriber": re.compile(r"\btranscriber", re.I),
    "start_of": re.compile(r"\bSTART\s+OF\s+(?:THE|THIS)\s+PROJECT\b|^\s*\*{3}\s*START\b"),
    "end_of": re.compile(r"\bEND\s+OF\s+(?:THE|THIS)\s+PROJECT\b|^\s*\*{3}\s*END\b|End of (?:the )?Project Gutenberg"),
    "license": re.compile(
        r"\bsmall\s+print\b|\blicen[cs]e\s+(?:agreement|terms)\b|\bthis\s+license\b|\bwarrant(?:y|ies)\b|"
        r"\bdisclaimer\b|\btrademark\b|\bliterary\s+archive\b|\bPGLAF\b",
        re.I,
    ),
    "ebook_etext": re.compile(r"\be-?books?\b|\be-?texts?\b", re.I),
}


CURLY_QUOTES = "\u2018\u2019\u201c\u201d"


def boilerplate_counts(text: str) -> dict[str, int]:
    """Number of lines matching each boilerplate pattern."""
    counts = dict.fromkeys(BOILERPLATE_PATTERNS, 0)
    for line in text.splitlines():
        for name, pat in BOILERPLATE_PATTERNS.items():
            if pat.search(line):
                counts[name] += 1
    return counts


def _dist(values) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return {"min": 0.0, "median": 0.0, "mean": 0.0, "max": 0.0}
    return {"min": float(v.min()), "median": float(np.median(v)), "mean": float(v.mean()), "max": float(v.max())}


def _file_bytes(path) -> bytes | None:
    """The document's file as given, before reading and cleaning; None for a document that is not a file of its own
    (a dataset row) or a file that cannot be read again."""
    try:
        return read_untrusted(path, "document")
    except OSError:
        return None


def set_stats(docs: Sequence[Document]) -> dict:
    """Per-set statistics (plain Python types, JSON-ready); ``docs_with_crlf`` counts the files as given, before
    cleaning; ``boilerplate_lines`` counts the lines left in the text read (after cleaning), and
    ``boilerplate_lines_removed`` those the cleaning removed (the file's count less the text's)."""
    words = [len(d.text.split()) for d in docs]
    chars = [len(d.text) for d in docs]
    per_doc_median_year, modern = [], 0
    for d in docs:
        years = years_mentioned(d.text)
        if len(years):
            per_doc_median_year.append(float(np.median(years)))
            modern += bool((years >= MODERN_YEAR).any())
    boiler = dict.fromkeys(BOILERPLATE_PATTERNS, 0)
    boiler_docs = dict.fromkeys(BOILERPLATE_PATTERNS, 0)
    removed = dict.fromkeys(BOILERPLATE_PATTERNS, 0)
    n_chars = sum(chars)
    non_ascii = curly = crlf = 0
    docs_curly = 0
    for d in docs:
        data = _file_bytes(d.path)
        left = boilerplate_counts(d.text)
        before = left if data is None else boilerplate_counts(data.decode("utf-8", errors="replace"))
        for name, c in left.items():
            boiler[name] += c
            boiler_docs[name] += c > 0
            removed[name] += max(before[name] - c, 0)
        if not d.text.isascii():
            non_ascii += sum(1 for ch in d.text if ord(ch) > 127)
        c = sum(d.text.count(q) for q in CURLY_QUOTES)
        curly += c
        docs_curly += c > 0
        crlf += data is not None and b"\r\n" in data
    n = len(docs)
    return {
        "n": n,
        "words": _dist(words),
        "chars": _dist(chars),
        "total_words": int(sum(words)),
        "total_chars": int(n_chars),
        "years": {
            "docs_naming_a_year": len(per_doc_median_year),
            "median_year": float(np.median(per_doc_median_year)) if per_doc_median_year else None,
            f"share_naming_{MODERN_YEAR}_or_later": modern / n if n else 0.0,
        },
        "boilerplate_lines": boiler,
        "boilerplate_docs": boiler_docs,
        "boilerplate_lines_removed": removed,
        "non_ascii_share": non_ascii / n_chars if n_chars else 0.0,
        "curly_quote_share": curly / n_chars if n_chars else 0.0,
        "docs_with_curly_quotes": docs_curly / n if n else 0.0,
        "docs_with_crlf": crlf / n if n else 0.0,
    }


def check_sets(
    docs_a: Sequence[Document],
    docs_b: Sequence[Document],
    folds: int = 5,
    seed: int = 0,
    kinds=KINDS,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    progress: bool = False,
    drop_duplicates: bool = False,
) -> dict:
    """Compare two document sets. Returns a JSON-ready dict with ``n_a``, ``n_b``, ``a`` and ``b`` (see
    :func:`set_stats`), ``blind`` (per kind mean/std AUC and TPRs), ``blind_auc``, ``blind_best_kind``, ``folds``
    (as given: fewer documents in either set is an error, ``config.rules.check_folds``), ``duplicates_dropped``
    (a text in both sets is an error, or with ``drop_duplicates`` left out of both: ``data.separate_sets``) and
    ``warning`` (text or None)."""
    docs_a, docs_b, duplicates = separate_sets(list(docs_a), list(docs_b), drop_duplicates, ("set A", "set B"))
    result: dict = {
        "n_a": len(docs_a),
        "n_b": len(docs_b),
        "a": set_stats(docs_a),
        "b": set_stats(docs_b),
        "duplicates_dropped": duplicates,
    }
    check_folds(folds, len(docs_a), len(docs_b), ("in set A", "in set B"))
    result.update(folds=folds, seed=seed, blind={}, blind_auc=None, blind_best_kind=None, max_chars=max_chars)
    texts = [d.text for d in docs_a] + [d.text for d in docs_b]
    labels = np.array([1] * len(docs_a) + [0] * len(docs_b))
    ev = evaluate_blind(
        texts, labels, chunk_folds(labels, folds, seed), kinds=kinds, max_chars=max_chars, seed=seed, progress=progress
    )
    result["blind"] = {kind: v["summary"] for kind, v in ev["kinds"].items()}
    result["blind_auc"] = ev["blind_auc"]
    result["blind_best_kind"] = ev["best_kind"]
    result["warning"] = shift_warning(result["blind_auc"])
    return result


def _tpr(summary: dict, key: str) -> str:
    """A blind baseline's mean TPR at an FPR, or why it was not estimated (too few non-members per fold)."""
    value = summary[f"{key}_mean"]
    return f"{value:.3f}" if value is not None else tpr_unavailable(int(key[7:-3]) / 100, " per fold")


def format_check(result: dict) -> str:
    """A human-readable text table of :func:`check_sets` output (without its warning, which goes to stderr)."""
    a, b = result["a"], result["b"]
    rows: list[tuple[str, str, str]] = [
        ("documents", f"{result['n_a']}", f"{result['n_b']}"),
        ("total words", f"{a['total_words']:,}", f"{b['total_words']:,}"),
    ]
    for stat in ("min", "median", "mean", "max"):
        rows.append((f"words per doc: {stat}", f"{a['words'][stat]:,.0f}", f"{b['words'][stat]:,.0f}"))
    ya, yb = a["years"], b["years"]
    fmt_year = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
    modern_key = f"share_naming_{MODERN_YEAR}_or_later"
    rows += [
        ("median year mentioned", fmt_year(ya["median_year"]), fmt_year(yb["median_year"])),
        (f"docs naming a year >= {MODERN_YEAR}", f"{ya[modern_key]:.1%}", f"{yb[modern_key]:.1%}"),
        ("non-ASCII characters", f"{a['non_ascii_share']:.3%}", f"{b['non_ascii_share']:.3%}"),
        ("curly quotes (of chars)", f"{a['curly_quote_share']:.3%}", f"{b['curly_quote_share']:.3%}"),
        ("docs with curly quotes", f"{a['docs_with_curly_quotes']:.1%}", f"{b['docs_with_curly_quotes']:.1%}"),
        ("files with CRLF line ends", f"{a['docs_with_crlf']:.1%}", f"{b['docs_with_crlf']:.1%}"),
    ]
    for name in BOILERPLATE_PATTERNS:
        rows.append(
            (
                f"boilerplate lines: {name}",
                *(
                    f"{s['boilerplate_lines_removed'][name]:,} removed, {s['boilerplate_lines'][name]:,} left"
                    + (f" in {s['boilerplate_docs'][name]} docs" if s["boilerplate_lines"][name] else "")
                    for s in (a, b)
                ),
            )
        )
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len("set A"), *(len(r[1]) for r in rows))
    w2 = max(len("set B"), *(len(r[2]) for r in rows))
    lines = [f"{'':<{w0}}  {'set A':>{w1}}  {'set B':>{w2}}"]
    lines += [f"{r[0]:<{w0}}  {r[1]:>{w1}}  {r[2]:>{w2}}" for r in rows]
    lines.append("")
    if result["blind"]:
        lines.append(f"blind baseline (model-free, A = members; {result['folds']} folds, seed {result['seed']}):")
        for kind, s in result["blind"].items():
            lines.append(
                f"  {kind:<6} AUC {s['auc_mean']:.3f} ± {s['auc_std']:.3f}   "
                + "   ".join(f"TPR@{p}%FPR {_tpr(s, f'tpr_at_{p}fpr')}" for p in (10, 1))
            )
        lines.append(f"  best: {result['blind_best_kind']} (blind AUC {result['blind_auc']:.3f})")
    else:
        lines.append("blind baseline: skipped (each set needs at least 2 documents)")
    if note := duplicates_note(result.get("duplicates_dropped")):
        lines.append(note)
    if result.get("skipped"):
        lines += ["", f"skipped {len(result['skipped'])} documents that cannot be used (listed with --format json)"]
    return "\n".join(lines)
