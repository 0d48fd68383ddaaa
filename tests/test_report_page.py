"""The contamination report page: what a rate means beside the calibration books, honest intervals, the blind
baseline, provenance, escaping; the book-level interval against its definition; the page in a real browser."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import corpus_ids, corpus_text
from test_cli import run
from test_evaluate_report import make_books, report_args

from docaudit import __version__
from docaudit.audit.contamination import book_bootstrap, wilson_interval

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def page(tiny_gpt2, tmp_path_factory):
    """One report over real book excerpts, with a book whose name is markup and snippets that overlap."""
    tmp = tmp_path_factory.mktemp("page")
    books = make_books(tmp)
    for i, book in enumerate(corpus_ids("members", 8)[5:7]):  # two more calibration members: the blind baseline runs
        (books["cal_mem"] / f"{book}.txt").write_text(corpus_text("members", book, n_chars=1500))
        book = corpus_ids("nonmembers", 8)[5 + i]
        (books["cal_non"] / f"{book}.txt").write_text(corpus_text("nonmembers", book, n_chars=1500))
    (books["audit"] / "<b>bold & co.txt").write_text(corpus_text("members", corpus_ids("members", 8)[7]))
    out = tmp / "rep"
    result = run(*report_args(books, tiny_gpt2, out, "--snippets", "8", "--book-bootstrap", "200"))
    assert result.exit_code == 0, result.output
    return out, result


def test_page_reads_against_the_calibration_books(page):
    out, result = page
    html = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    info = report["info"]
    # what a rate means: the reference ranges of the calibration books, in words, on the page and in the terminal
    cal = pd.read_csv(out / "calibration.csv")
    non = cal.contamination_rate[cal.label == "non-member"]
    sentence = f"known non-members score {non.min():.1%} to {non.max():.1%}"
    assert sentence in html and sentence in result.stdout and "How to read this" in html
    # human headers and one number format
    for header in ("Contamination rate", "Book-level 95% interval", "Wilson 95% interval", "Snippets over threshold"):
        assert header in html
    assert "contamination_rate" not in html and "ci_low" not in html
    # the blind baseline on the calibration books, with evaluate's warning when it is high
    assert info["blind_auc"] is not None and f"AUC {info['blind_auc']:.3f}" in html
    assert ("distribution shift" in html) == ("distribution shift" in result.stderr) == bool(info["blind_warning"])
    # snippets overlap: 8 x 40 words is more than the ~250-word books (not the longer one)
    assert "11 of 12 books have fewer than 8 x 40 words" in html and "fewer non-overlapping" in result.stderr
    books = pd.read_csv(out / "report.csv")
    assert not books.snippets_overlap.any() and (books.overlapping_snippets == 0).all()
    assert ((books.n_snippets < 8) == (books.n_words < 8 * 40)).all() and (books.n_snippets < 8).sum() == 3
    assert (books.n_snippets == np.minimum(8, books.n_words // 40)).all()
    assert (books.book_ci_low <= books.book_ci_high).all()
    assert ((books.book_ci_low >= 0) & (books.book_ci_high <= 1)).all()
    # provenance, on the page and in report.json
    prov = info["provenance"]
    assert report["docaudit_version"] == prov["docaudit_version"] == __version__
    assert prov["model_identity"].startswith("local@") and prov["tokenizer"] and prov["created"]
    assert prov["command"].startswith("docaudit report ") and "--snippets 8 --book-bootstrap 200" in prov["command"]
    for value in (prov["model_identity"], prov["tokenizer"], prov["created"], __version__, prov["command"]):
        assert value in html
    assert "<table>" in html and html.count("data:image/png;base64,") == 3


def test_user_strings_are_escaped(page):
    out, _ = page
    html = (out / "report.html").read_text()
    assert "<b>bold" not in html and "&lt;b&gt;bold &amp; co" in html


def test_book_level_interval_counts_the_calibration_books():
    """Identical calibration books: the interval is the snippet bootstrap's, close to Wilson's. Calibration
    non-members that differ from book to book move the threshold: the interval widens."""
    rng = np.random.default_rng(0)

    def snippets(non_member_means):
        rows = []
        for role, means in (("member", [2.0] * 4), ("non-member", non_member_means), ("audited", [0.5])):
            for b, m in enumerate(means):
                rows += [
                    {"role": role, "book": f"{role}{b}", "file": f"{role}{b}.txt", "score": s}
                    for s in rng.normal(m, 0.5, 100)
                ]
        return pd.DataFrame(rows)

    same = book_bootstrap(snippets([0.0] * 4), None, 300, 0.95, 0)
    varied = book_bootstrap(snippets([-1.0, -0.5, 0.5, 1.5]), None, 300, 0.95, 0)
    assert list(same.book) == ["audited0"]
    width = lambda f: float(f.book_ci_high.iloc[0] - f.book_ci_low.iloc[0])  # noqa: E731
    assert width(varied) > 1.5 * width(same)
    lo, hi = wilson_interval(50, 100)
    assert width(same) < 2 * (hi - lo)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs the Debian chromium package")
def test_page_renders_in_a_browser(page, tmp_path):
    out, _ = page
    png = tmp_path / "page.png"
    done = subprocess.run(
        ["bash", REPO / "scripts" / "artifacts" / "screenshot_report.sh", out / "report.html", png, "1280,1600"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (1600, 1280) and pixels[..., :3].std() > 0.05  # not a blank page


def test_roc_style_shared_by_every_command(tmp_path):
    """AUC in each legend entry, a log-log panel, and a curve at AUC 1.0 drawn over the frame, not under it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from docaudit.report.plots import _draw_roc, plot_roc, roc_frame

    y = np.array([0] * 50 + [1] * 50)
    frame = roc_frame({"perfect": (y, y.astype(float)), "noise": (y, np.random.default_rng(0).random(100))})
    for log in (False, True):
        fig, ax = plt.subplots()
        handles = _draw_roc(ax, frame, "t", log=log)
        assert handles[0].get_label() == "perfect (AUC 1.000)" and "noise (AUC 0." in handles[1].get_label()
        assert ax.get_xscale() == ("log" if log else "linear") and ax.get_ylim()[1] > 1
        assert not handles[0].get_clip_on()
        plt.close(fig)
    plot_roc(frame, tmp_path / "roc.png", title="t")
    height, width = matplotlib.image.imread(tmp_path / "roc.png").shape[:2]
    assert width > 1.5 * height  # linear and log-log side by side, the legend under them


def test_a_threshold_at_infinity_is_called_out():
    from docaudit.audit.contamination import threshold_warning
    from docaudit.report.contamination import report_warnings

    assert threshold_warning(0.3) is None
    low, high = threshold_warning(-np.inf), threshold_warning(np.inf)
    assert "every rate is 100%" in low and "every rate is 0%" in high
    assert report_warnings({"warning": "a", "threshold_warning": low, "overlap_warning": None}) == ["a", low]
