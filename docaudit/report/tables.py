"""Tables and plots: ROC curves as CSV and PNG, metric tables as text."""

from __future__ import annotations

import html

import pandas as pd

from docaudit.metrics import min_nonmembers, tpr_unavailable


def fpr_of(key: str) -> float:
    """The FPR of a metric key: 0.01 for ``tpr_at_1fpr``."""
    return int(key.removeprefix("tpr_at_").split("fpr")[0]) / 100


def tpr_mean_std(key: str, mean, std) -> str:
    """``45.0% ± 8.1%``, or, where the folds' non-members were too few to estimate the TPR (None),
    ``n/a (needs ≥ 100 non-members per fold)``."""
    return tpr_unavailable(fpr_of(key), " per fold") if mean is None or pd.isna(mean) else mean_std(mean, std, True)


def mean_std(mean: float, std: float, percent: bool = False) -> str:
    """``0.812 ± 0.041`` or, with ``percent``, ``45.0% ± 8.1%``; empty for a missing value."""
    if pd.isna(mean):
        return ""
    return f"{mean:.1%} ± {std:.1%}" if percent else f"{mean:.3f} ± {std:.3f}"


def format_methods_table(table: pd.DataFrame) -> str:
    """Rows per method × level, the paper's Table 4 layout. One note line above the table says what each AUC is;
    then per row the pooled out-of-fold AUC (where present) with its bootstrap interval, the mean ± std of the
    folds' AUCs, and the TPR at 10% and 1% FPR over folds. A TPR column no row could estimate (too few non-members
    per fold) is left out and named in the note instead of reading "n/a" on every row."""
    tprs = [key for key in ("tpr_at_10fpr", "tpr_at_1fpr") if table[f"{key}_mean"].notna().any()]
    missing = [key for key in ("tpr_at_10fpr", "tpr_at_1fpr") if key not in tprs]
    shown = pd.DataFrame({"method": table["method"], "level": table["level"]})
    notes = []
    if "pooled_auc" in table and table.pooled_auc.notna().any():
        shown["pooled AUC [95% CI]"] = [
            "" if pd.isna(p) else f"{p:.3f}" + ("" if pd.isna(lo) else f" [{lo:.3f}, {hi:.3f}]")
            for p, lo, hi in zip(table.pooled_auc, table.pooled_auc_ci_low, table.pooled_auc_ci_high)
        ]
        notes.append(
            "pooled AUC: all out-of-fold scores at once, as roc.png draws them (below the folds' mean where a "
            "classifier refitted per fold shifts its scores between folds; sequence rows: no interval, a document's "
            "sequences are not independent)"
        )
    shown["AUC per fold"] = [mean_std(m, s) for m, s in zip(table.auc_mean, table.auc_std)]
    notes.append("AUC per fold: mean ± std of the folds' AUCs (the paper's Table 4)")
    for key in tprs:
        shown[f"TPR@{round(fpr_of(key) * 100)}%FPR"] = [
            "" if pd.isna(a) else tpr_mean_std(key, m, s)
            for a, m, s in zip(table.auc_mean, table[f"{key}_mean"], table[f"{key}_std"])
        ]
    if missing:
        notes.append(
            "; ".join(
                f"TPR at {round(fpr_of(key) * 100)}% FPR not shown: needs ≥ {min_nonmembers(fpr_of(key))} "
                "non-members per fold"
                for key in missing
            )
        )
    return "\n".join(notes + [""]) + shown.to_string(index=False)


def format_grid(table: pd.DataFrame) -> str:
    """``train --grid``'s rows (one per normalization, features and context) as text; a TPR that the folds'
    non-members were too few to estimate reads ``n/a (needs ≥ N non-members per fold)``."""
    shown = table.copy()
    for column in [c for c in table.columns if c.startswith("tpr_at_")]:
        key = column.rsplit("_", 1)[0]
        shown[column] = [tpr_unavailable(fpr_of(key), " per fold") if pd.isna(v) else f"{v:.3f}" for v in table[column]]
    return shown.to_string(index=False, float_format="%.3f")


def format_auc_pivot(table: pd.DataFrame) -> str:
    """AUC mean ± std with one row per method and one column per level (blank where a method has no such level)."""
    cells = table.assign(cell=[mean_std(m, s) for m, s in zip(table.auc_mean, table.auc_std)])
    pivot = cells.pivot(index="method", columns="level", values="cell").fillna("")
    pivot = pivot.reindex(index=list(dict.fromkeys(table.method)), columns=list(dict.fromkeys(table.level)))
    return pivot.fillna("").to_string()


MISSING = "-"  # a cell a row has no value for (a skipped document's scores)


def rows_table(rows: list[dict], floats: str = "{:.4f}") -> str:
    """Rows as a text table: a column whose values are all whole numbers printed as integers (a skipped row's empty
    cells would make pandas print ``586.0000``), other numbers with ``floats``, an empty cell as ``MISSING``."""
    import numbers

    def empty(v) -> bool:
        return v is None or (isinstance(v, float) and v != v)

    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        whole = all(isinstance(v, numbers.Integral) or empty(v) for v in values)
        cells[column] = [
            MISSING
            if empty(v)
            else str(v)
            if whole or isinstance(v, (bool, str)) or not isinstance(v, numbers.Real)
            else floats.format(v)
            for v in values
        ]
    return pd.DataFrame(cells, columns=columns).to_string(index=False)


def html_table(frame: pd.DataFrame, floats: str = "{:.3f}") -> str:
    """A plain HTML table of a DataFrame (values escaped, floats formatted)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for _, row in frame.iterrows():
        cells = [floats.format(v) if isinstance(v, float) else str(v) for v in row]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def format_query(query: dict) -> str:
    """``context 128, stride 127, max tokens 512 (random excerpt, seed 0)`` from ``QueryConfig.used(seed)``."""
    stride = query["stride"] if query["stride"] is not None else query["context"] - 1
    return f"context {query['context']}, stride {stride}, max tokens {query['max_tokens'] or 'all'}" + (
        f" ({query['excerpt']} excerpt, seed {query['seed']})" if query["max_tokens"] else ""
    )


def format_summary(summary: dict) -> str:
    """``AUC 0.812 ± 0.041 | TPR@10%FPR 45.0% ± 8.1% | TPR@1%FPR n/a (needs ≥ 100 non-members per fold)``."""
    return " | ".join(
        [f"AUC {summary['auc_mean']:.3f} ± {summary['auc_std']:.3f}"]
        + [
            f"TPR@{pct}%FPR {tpr_mean_std(key, summary[f'{key}_mean'], summary[f'{key}_std'])}"
            for pct, key in ((10, "tpr_at_10fpr"), (1, "tpr_at_1fpr"))
        ]
    )


def format_beyond_blind(beyond: dict | None) -> str:
    """One paragraph on what the model adds over the blind baseline (the ``beyond_blind`` fields); empty when the
    comparison was not run."""
    if not beyond:
        return ""
    if "unavailable" in beyond:
        return f"beyond the blind baseline: not computed ({beyond['unavailable']})"
    lo, hi = beyond["delta_ci_low"], beyond["delta_ci_high"]
    p = beyond["p_value"]
    p_text = f"p = {p:.3g}" if p is not None else f"no p-value ({beyond.get('p_value_reason', 'not computed')})"
    return (
        f"beyond the blind baseline (pooled out-of-fold AUC, {beyond['folds']} folds; every score through the same "
        "combiner, standardized per fold, so these differ from the table's rows): "
        f"blind ({beyond['blind_kind']}) {beyond['auc_blind']:.3f}, model ({beyond['model']}) "
        f"{beyond['auc_model']:.3f}, blind + model {beyond['auc_combined']:.3f}\n  delta {beyond['delta']:+.3f} "
        f"({beyond['confidence']:.0%} paired bootstrap interval {lo:+.3f} to {hi:+.3f}), DeLong one-sided "
        f"{p_text}: {beyond['verdict']}"
    )


def beyond_blind_sentence(beyond: dict | None) -> str:
    """What the model adds over the blind baseline as one sentence for the report page (the ``beyond_blind``
    fields): the reading first, then the numbers it rests on; empty when the comparison was not run."""
    if not beyond:
        return ""
    if "unavailable" in beyond:
        return (
            f"Whether the model adds anything beyond a blind classifier of the texts was not computed: "
            f"{beyond['unavailable']}."
        )
    p = beyond["p_value"]
    p_text = f"DeLong one-sided p = {p:.3g}" if p is not None else f"no p-value: {beyond.get('p_value_reason')}"
    reading = beyond["verdict"][0].upper() + beyond["verdict"][1:]
    return (
        f"{reading}: on the calibration books, the {beyond['blind_kind']} blind classifier of the texts tells them "
        f"apart with AUC {beyond['auc_blind']:.2f} and it together with the model ({beyond['model']}) with "
        f"{beyond['auc_combined']:.2f}, a difference of {beyond['delta']:+.2f} ({beyond['confidence']:.0%} interval "
        f"{beyond['delta_ci_low']:+.2f} to {beyond['delta_ci_high']:+.2f}; {p_text})."
    )


def format_dataset_checks(result) -> str:
    """The dataset test's checks beside its p-value (a ``DatasetTestResult``): the blind p-value and which p-value
    to rely on, the p-value by number of suspects, and the verdict."""
    blind = (
        f"p = {result.p_value_blind:.3g} (model-free {result.blind_kind} classifier of the texts, same splits)"
        if result.p_value_blind is not None
        else f"not computed ({result.blind_reason})"
    )
    sizes = "  ".join(f"{row['n_suspect']}: {row['p_value']:.3g}" for row in result.p_by_size)
    verdict = result.verdict["verdict"] + (f" ({result.verdict['reason']})" if result.verdict["reason"] else "")
    return (
        f"blind baseline: {blind}\n{result.rely_on}\n"
        f"p-value by number of suspect documents: {sizes}\nverdict: {verdict}"
    )


def format_sequence_metrics(metrics: pd.DataFrame) -> str:
    """The sequence-level metrics as text: AUC [95% interval] and TPR at each FPR per method (rows) over all texts
    and per length bucket, then the k sweep's AUCs."""

    def cell(row, key, percent=False):
        if percent and pd.isna(row[key]):  # too few non-members in this set to estimate the TPR
            return tpr_unavailable(fpr_of(key))
        f = "{:.1%}" if percent else "{:.3f}"
        return f"{f.format(row[key])} [{f.format(row[key + '_ci_low'])}, {f.format(row[key + '_ci_high'])}]"

    tprs = [c for c in metrics.columns if c.startswith("tpr_at_") and not c.endswith(("_ci_low", "_ci_high"))]
    plain = metrics[metrics["k"].isna()]
    table = pd.DataFrame(
        {
            "method": plain["method"],
            "bucket": plain["bucket"],
            "n": plain["n_members"].astype(str) + "+" + plain["n_nonmembers"].astype(str),
            "AUC": [cell(r, "auc") for _, r in plain.iterrows()],
            **{
                t.replace("tpr_at_", "TPR@").replace("fpr", "%FPR"): [cell(r, t, True) for _, r in plain.iterrows()]
                for t in tprs
            },
        }
    )
    out = table.to_string(index=False)
    swept = metrics[metrics["k"].notna()]
    if len(swept):
        pivot = swept.pivot_table(index="method", columns="k", values="auc", sort=False)
        out += "\n\nAUC by k (Min-K% / Min-K%++ share):\n" + pivot.to_string(float_format="%.3f")
    return out


def format_precisions(precisions: list[dict]) -> str:
    """Each method's mean AUC per query precision (``lab --extra-dtypes / --extra-quantize``), one column each."""
    table = pd.DataFrame(precisions).pivot_table(
        index=["method", "level"], columns="precision", values="auc_mean", sort=False
    )
    return table.to_string(float_format="%.3f")
