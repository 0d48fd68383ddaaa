"""Verdicts in words for the terminal: for each document the verdict line first, then the numbers it rests on."""

from __future__ import annotations

from docaudit.corpus.metadata import display_name


def _num(value, spec: str = ".3g") -> str:
    return "n/a" if value is None or value != value else format(value, spec)


def verdict_line(row: dict) -> str:
    """``verdict`` or ``inconclusive: reason``."""
    return row["verdict"] + (f": {row['reason']}" if row.get("reason") else "")


def shared_reasons(rows: list[dict]) -> list[dict]:
    """The reasons (code and sentence) that every judged document of ``rows`` has, printed once above them."""
    done = [r for r in rows if "verdict" in r]
    if not done or any(not r.get("reasons") for r in done):
        return []
    first = done[0]["reasons"]
    return [
        x
        for x in first
        if all(any(y["code"] == x["code"] and y["text"] == x["text"] for y in r["reasons"]) for r in done)
    ]


def own_reasons(row: dict, shared: list[dict]) -> list[str]:
    """A judged document's verdict line, with its own reasons beside the ``shared`` ones printed above, and the next
    step of each of its own."""
    codes = {x["code"] for x in shared}
    own = [x for x in row.get("reasons", []) if x["code"] not in codes]
    if row["verdict"] == "inconclusive" and shared and not own:
        line = "  inconclusive (the reasons above)"
    elif shared and own:
        line = f"  inconclusive: {'; '.join(x['text'] for x in own)} (and the reasons above)"
    else:
        line = f"  {verdict_line(row)}"
    return [line, *(f"  next step: {x['next_step']}" for x in own)]


def format_predictions(rows: list[dict]) -> str:
    """``predict``'s table: a header with the classifier's quality, its smallest attainable p-value and the reasons
    shared by every document (each with its next step), then per document its file, its verdict line with its own
    reasons and their next steps, and its numbers (a skipped document: why)."""
    lines = []
    done = [r for r in rows if "verdict" in r]
    shared = shared_reasons(rows)
    if done:
        first = done[0]
        lo, hi = first["classifier_auc_ci_low"], first["classifier_auc_ci_high"]
        head = f"classifier AUC {first['classifier_auc']:.3f} (95% interval {lo:.3f}-{hi:.3f})"
        if first["n_known_nonmembers"] is not None:
            n = first["n_known_nonmembers"]
            head += f"; {n} known non-members: smallest attainable p-value {first['smallest_p']:.3g}"
        tested = sum(r["q_value"] is not None for r in done)
        lines.append(
            head + f"; alpha {first['alpha']:g} after Benjamini-Hochberg over the {tested} of {len(done)} "
            "document(s) that passed every gate"
        )
        for reason in shared:
            lines += [f"every document: inconclusive: {reason['text']}", f"  next step: {reason['next_step']}"]
        lines.append("")
    for row in rows:
        lines.append(row["file"])
        if "verdict" not in row:
            lines += [f"  skipped: {row['skipped']}", ""]
            continue
        lines += own_reasons(row, shared)
        lines.append(
            f"  p_value {_num(row['p_value'])}  q_value {_num(row['q_value'])}  p_value_blind "
            f"{_num(row['p_value_blind'])}  membership_score {row['membership_score']:.3f}  tokens "
            f"{row['n_tokens']} of {row['n_tokens_total']}"
        )
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def report_level(v: dict) -> str:
    """The level ``report``'s verdicts were decided at: ``alpha 0.05``, or with several methods ``alpha 0.05 / 3
    methods = 0.0167 per method``."""
    if v.get("n_methods", 1) > 1:
        return f"alpha {v['alpha']:g} / {v['n_methods']} methods = {v['alpha_per_method']:.3g} per method"
    return f"alpha {v['alpha']:g}"


def debiased_text(row: dict, level: str) -> str:
    """A book's debiased fraction with its interval, or ``n/a`` and why."""
    value = row.get("debiased_fraction")
    if value is None or value != value:
        return "n/a (no verdict: see the reason)"
    return f"{value:.1%} ({level} {row['debiased_ci_low']:.1%} – {row['debiased_ci_high']:.1%})"


def format_report_verdicts(books, info: dict) -> str:
    """``report``'s verdicts: per book the verdict line first, then its p-, q- and blind p-value, the snippet count
    its rate was compared at and its debiased fraction beside the raw rate."""
    v = info["verdicts"]
    level = f"{info['confidence']:.0%}"
    lines = [
        f"verdicts ({report_level(v)}, after Benjamini-Yekutieli over {len(books)} books; "
        f"{v['n_known_nonmembers']} calibration non-members: smallest attainable p-value {v['smallest_p']:.3g}); "
        f"debiased fraction = (rate - FPR {v['fpr']:.3f}) / (TPR {v['tpr']:.3f} - FPR), {level} prediction interval",
        "",
    ]
    rows = books.to_dict(orient="records")
    shared = shared_reasons(rows)
    for reason in shared:
        lines += [f"every book: inconclusive: {reason['text']}", f"  next step: {reason['next_step']}"]
    if shared:
        lines.append("")
    for row in rows:
        compared = row.get("n_compared")
        lines += [display_name(row["book"], row.get("title"), row.get("author")), *own_reasons(row, shared)]
        lines += [
            f"  p_value {_num(row['p_value'])}  q_value {_num(row['q_value'])}  p_value_blind "
            f"{_num(row['p_value_blind'])}  compared at {_num(compared, '.0f')} snippets  rate "
            f"{row['contamination_rate']:.1%}  debiased {debiased_text(row, level)}",
            "",
        ]
    return "\n".join(lines).rstrip("\n")
