"""Where the truth is known: a model never trained on any of the books, PG-19 excerpts as "members" and post-2024
excerpts as "non-members" (the sets differ by era, not by training). No held-out PG-19 excerpt may get "evidence of
membership"; they come out "inconclusive" (the blind baseline separates them) or "no evidence". With 40 known
non-members the smallest p-value 1/41 is below 0.05, so "evidence" is reachable and the test can fail."""

import json

import pytest
from click.testing import CliRunner
from conftest import CORPUS

from docaudit.cli import main
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE


def excerpt(path, n_words=200):
    words = path.read_text(encoding="utf-8").split()
    return " ".join(words[len(words) // 2 : len(words) // 2 + n_words])


@pytest.mark.slow
def test_shifted_never_trained_books_get_no_evidence(tiny_gpt2, tmp_path):
    sets = {}
    for group, n in (("members", 30), ("nonmembers", 40)):
        d = tmp_path / group
        d.mkdir()
        for path in sorted((CORPUS / group).glob("*.txt"))[:n]:
            (d / path.name).write_text(excerpt(path), encoding="utf-8")
        sets[group] = sorted(d.iterdir())
    held = tmp_path / "held"
    held.mkdir()
    for path in sets["members"][24:]:
        path.rename(held / path.name)
    out = tmp_path / "clf"
    fast = ["--context", "16", "--max-tokens", "64", "--trees", "30", "--bins", "20", "--norm", "max_tf"]
    result = CliRunner().invoke(
        main,
        [
            "train",
            "--members",
            str(tmp_path / "members"),
            "--nonmembers",
            str(tmp_path / "nonmembers"),
            "--model",
            str(tiny_gpt2),
            *fast,
            "--features",
            "hist",
            "--folds",
            "3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["predict", "--classifier", str(out), "--format", "json", str(held)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 6 and rows[0]["smallest_p"] == 1 / 41
    # evidence was reachable: every document has a p-value and none is held back by the number of non-members
    assert all(row["p_value"] is not None and "too_few_nonmembers" not in row["reason_codes"] for row in rows)
    assert not any(row["verdict"] == EVIDENCE for row in rows), rows
    # the blind baseline sees the shift: the reason is given, not a silent "no evidence"
    blind = [row for row in rows if row["verdict"] == INCONCLUSIVE and "blind baseline" in row["reason"]]
    assert blind, rows
    # with 6 documents and a smallest p-value of 1/41, "no evidence" says little whatever the p-values are: what
    # can fail is the gates. Every shifted document is held back by a gate that sees the shift, none passes on to
    # Benjamini-Hochberg
    shift = {"distribution_shift", "blind_separates"}
    assert all(row["verdict"] == INCONCLUSIVE and shift & set(row["reason_codes"]) for row in rows), [
        (row["verdict"], row["reason_codes"]) for row in rows
    ]
    assert all(row["q_value"] is None for row in rows)
