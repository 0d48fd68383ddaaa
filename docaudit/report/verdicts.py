"""Verdicts in words for the terminal: for each document the verdict line first, then the numbers it rests on."""

from __future__ import annotations


def _num(value, spec: str = ".3g") -> str:
    return "n/a" if value is None else format(value, spec)


def verdict_line(row: dict) -> str:
    """``verdict`` or ``inconclusive: reason``."""
    return row["verdict"] + (f": {row['reason']}" if row.get("reason") else "")


def format_predictions(rows: list[dict]) -> str:
    """``predict``'s table: a header with the classifier's quality and its smallest attainable p-value, then per
    document its file, its verdict line and its numbers (a skipped document: why)."""
    lines = []
    done = [r for r in rows if "verdict" in r]
    if done:
        first = done[0]
        lo, hi = first["classifier_auc_ci"]
        head = f"classifier AUC {first['classifier_auc']:.3f} (95% interval {lo:.3f}-{hi:.3f})"
        if first["n_known_nonmembers"] is not None:
            n = first["n_known_nonmembers"]
            head += f"; {n} known non-members: smallest attainable p-value 1/{n + 1} = {first['smallest_p']:.3g}"
        lines += [head + f"; alpha {first['alpha']:g} after Benjamini-Hochberg over {len(done)} document(s)", ""]
    for row in rows:
        lines.append(row["file"])
        if "verdict" not in row:
            lines += [f"  skipped: {row['skipped']}", ""]
            continue
        lines.append(f"  {verdict_line(row)}")
        lines.append(
            f"  p_value {_num(row['p_value'])}  q_value {_num(row['q_value'])}  p_value_blind "
            f"{_num(row['p_value_blind'])}  membership_score {row['membership_score']:.3f}  tokens "
            f"{row['n_tokens']} of {row['n_tokens_total']}"
        )
        lines.append("")
    return "\n".join(lines).rstrip("\n")
