"""What a user reads: the commands in the order of the work, data check's boilerplate counts."""

from __future__ import annotations

from click.testing import CliRunner

from docaudit.audit.datacheck import check_sets, format_check
from docaudit.cli import main
from docaudit.corpus.documents import load_document

HEADER = (
    "The Project Gutenberg EBook of A Tale, by Someone\n\nThis eBook is for the use of anyone anywhere at no cost.\n"
    "You may copy it under the terms of the Project Gutenberg License included\nwith this eBook or online at "
    "www.gutenberg.org\n\nTitle: A Tale\n\nAuthor: Someone\n\n*** START OF THIS PROJECT GUTENBERG EBOOK A TALE ***\n\n"
)
FOOTER = (
    "\n\n*** END OF THIS PROJECT GUTENBERG EBOOK A TALE ***\n\nUpdated editions will replace the previous one.\n"
    "Project Gutenberg is a registered trademark.\n"
)


def test_help_lists_commands_in_the_order_of_the_work_with_whole_sentences():
    out = CliRunner().invoke(main, ["--help"]).output
    listed = out.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.startswith("  ") and not line.startswith("   ")]
    assert names == [
        "audit", "train", "predict", "evaluate", "report", "map", "controls", "probe", "extract", "sequence", "score",
        "dataset-test",
        "data", "traps", "lab", "config", "cache",
    ]  # fmt: skip
    assert "..." not in out.split("Commands:", 1)[1]
    for group in (["traps"], ["data"], ["cache"], ["config"]):
        sub = CliRunner().invoke(main, [*group, "--help"]).output
        assert "..." not in sub.split("Commands:", 1)[1], group


def test_data_check_counts_the_boilerplate_it_removed(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        for i in range(2):
            body = f"Chapter {i}.\n\nIt was a {folder} day, and the {i} birds sang in the trees of the old garden."
            (tmp_path / folder / f"{i}.txt").write_text(HEADER + body + FOOTER, encoding="utf-8")
    docs = [[load_document(p) for p in sorted((tmp_path / f).glob("*.txt"))] for f in ("a", "b")]
    raw = (HEADER + FOOTER).splitlines()
    in_header = sum("project gutenberg" in line.lower() or "gutenberg.org" in line for line in raw)
    result = check_sets(*docs, folds=2, kinds=("tfidf",))
    assert result["a"]["boilerplate_lines"]["project_gutenberg"] == 0
    assert result["a"]["boilerplate_lines_removed"]["project_gutenberg"] == 2 * in_header
    row = next(line for line in format_check(result).splitlines() if "project_gutenberg" in line)
    assert f"{2 * in_header} removed, 0 left" in row


def test_every_calibration_book_has_its_own_dot(tmp_path):
    """Five calibration books with the same rate (rates are multiples of 1/snippets, ties are common) and two close
    ones: every dot at its own place, none hidden under another."""
    import itertools

    import numpy as np
    import pandas as pd

    from docaudit.report.plots import plot_rate_strip, swarm_offsets

    rates = np.array([20.0] * 5 + [50.0, 50.5])
    offsets = swarm_offsets(rates, width=1.6, height=0.12)
    for (xa, ya), (xb, yb) in itertools.combinations(zip(rates, offsets), 2):
        assert ((xa - xb) / 1.6) ** 2 + ((ya - yb) / 0.12) ** 2 >= 1 - 1e-9  # the dots do not overlap
    assert np.abs(offsets).max() <= 0.42 and sorted(np.round(offsets[:5], 2)) == [-0.24, -0.12, 0.0, 0.12, 0.24]
    many = swarm_offsets(np.zeros(30), width=1.6)  # more than fit: squeezed into the row, still each its own place
    assert np.abs(many).max() <= 0.42 + 1e-12 and len(np.unique(np.round(many, 9))) == 30
    calibration = pd.DataFrame({"contamination_rate": rates / 100, "label": ["non-member"] * 5 + ["member"] * 2})
    books = pd.DataFrame({"book": ["1"], "contamination_rate": [0.3], "book_ci_low": [0.1], "book_ci_high": [0.5]})
    plot_rate_strip(books, calibration, tmp_path / "rates.png", "Loss")
    assert (tmp_path / "rates.png").stat().st_size > 0


def test_verdict_first_keeps_every_column():
    import pandas as pd

    from docaudit.report.contamination import verdict_first

    books = pd.DataFrame([{"book": "1", "rate": 0.5, "p_value": 0.2, "verdict": "inconclusive", "reason": "few"}])
    assert list(verdict_first(books).columns) == ["verdict", "reason", "book", "rate", "p_value"]
