"""Evidence beyond the blind baseline where the truth is known.

One tiny target (``labtarget.TINY``) is trained on the leading 256 tokens of 24 PG-19 excerpts chosen at random
(``S``, from 64) and of 8 excerpts of books posted after 2024 that no set below holds. Every excerpt is 2,000
words from the middle of a book (read by path from the shared corpus); the model is queried on each excerpt's
leading 256 tokens, the blind classifier reads all of it. Then:

- (a) ``S`` against the other 40 PG-19 excerpts (``U``): membership assigned at random, so the blind AUC is near
  0.5 and the model adds clear evidence;
- (b) ``U`` against 40 post-2024 excerpts (``M``): neither set was trained on, but they differ by era, so the blind
  AUC is high; the target knows PG-19 text better (it was trained on ``S``), yet delta's interval holds 0;
- (c) ``S`` and 6 of ``U`` against ``M``: the same shift with most PG-19 excerpts trained on: delta > 0.
"""

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import CORPUS
from labtarget import TINY, book_excerpt, single_thread

from docaudit import api
from docaudit.audit.specs import EvaluationSpec
from docaudit.cli import main
from docaudit.config import MetaConfig, ModelConfig, QueryConfig
from docaudit.inference.comparison import ADDS, NO_EVIDENCE_BEYOND, NOTHING, reading
from docaudit.lab.experiment import split_members
from docaudit.lab.target import train_target

# every test here needs the target that `shifted` trains on book excerpts; the unit tests are in test_beyond_blind.py
pytestmark = pytest.mark.slow

WORDS, TOKENS = 2000, 256
QUERY = ["--context", "63", "--max-tokens", str(TOKENS), "--excerpt", "leading"]
META = ["--norm", "none", "--features", "hist", "--trees", "100", "--bins", "50"]


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    root = tmp_path_factory.mktemp("beyond")
    pg19 = {p.stem: book_excerpt(p, WORDS) for p in sorted((CORPUS / "members").glob("*.txt"))[-64:]}
    recent = sorted((CORPUS / "nonmembers").glob("*.txt"))
    modern = {p.stem: book_excerpt(p, WORDS) for p in recent[:40]}
    other = [book_excerpt(p, WORDS) for p in recent[40:48]]
    split = split_members(list(pg19), seed=0, member_fraction=24 / 64)
    sets = {
        "S": {b: pg19[b] for b in pg19 if split[b]},
        "U": {b: pg19[b] for b in pg19 if not split[b]},
        "M": modern,
    }
    sets["U6"] = dict(list(sets["U"].items())[:6])
    for name, texts in sets.items():
        (root / name).mkdir()
        for book, text in texts.items():
            (root / name / f"{book}.txt").write_text(text)
    config = replace(TINY, doc_tokens=TOKENS)
    with single_thread():
        pool = [*pg19.values(), *modern.values(), *other]
        model = train_target([*sets["S"].values(), *other], pool, root / "t", config)
    return root, model, sets


def _evaluate(members, nonmembers, model):
    with single_thread():
        request = api.EvaluateRequest(
            members,
            nonmembers,
            models=api.ModelSpec(ModelConfig(model=str(model))),
            query=QueryConfig(context=63, max_tokens=TOKENS, excerpt="leading"),
            detectors=api.DetectorSpec("loss"),
            spec=EvaluationSpec(
                meta=MetaConfig(norm="none", features="hist", n_estimators=100, bins=50), levels=("doc_avg",)
            ),
        )
        result = api.evaluate(request)
    return result.evaluation.beyond_blind


def test_a_random_split_blind_near_chance_model_adds(shifted):
    root, model, _ = shifted
    b = _evaluate([root / "S"], [root / "U"], model)
    print(
        "(a)",
        {
            k: b[k]
            for k in ("auc_blind", "auc_model", "auc_combined", "delta", "delta_ci_low", "delta_ci_high", "p_value")
        },
    )
    assert 0.35 <= b["auc_blind"] <= 0.65
    assert b["auc_model"] >= 0.95 and b["auc_combined"] >= b["auc_model"] - 0.05
    assert b["delta"] == pytest.approx(b["auc_combined"] - b["auc_blind"])
    assert b["delta_ci_low"] > 0.2 and b["p_value"] < 0.001 and b["verdict"] == reading(ADDS, b["blind_kind"])


def test_b_shifted_sets_never_trained_on_do_not_fool_it(shifted, tmp_path):
    """Through the command line: the JSON it prints and evaluation.json carry the same comparison."""
    root, model, _ = shifted
    args = ["evaluate", "--members", root / "U", "--nonmembers", root / "M", "--model", model, *QUERY, *META]
    with single_thread():
        result = CliRunner().invoke(main, [*args, "--methods", "loss", "--format", "json", "--out", tmp_path / "ev"])
    assert result.exit_code == 0, result.output
    b = json.loads(result.stdout)["beyond_blind"]
    print(
        "(b)",
        {
            k: b[k]
            for k in ("auc_blind", "auc_model", "auc_combined", "delta", "delta_ci_low", "delta_ci_high", "p_value")
        },
    )
    assert json.loads((tmp_path / "ev" / "evaluation.json").read_text())["beyond_blind"] == b
    assert b["model"] == "meta_classifier" and b["auc_blind"] >= 0.7
    assert b["delta_ci_low"] <= 0 <= b["delta_ci_high"] and b["p_value"] > 0.05
    assert b["verdict"] in [reading(t, b["blind_kind"]) for t in (NO_EVIDENCE_BEYOND, NOTHING)]


def test_c_shifted_sets_with_trained_members_show_added_evidence(shifted, tmp_path):
    """Through the command line's text output, with a named detector as the model."""
    root, model, _ = shifted
    args = ["evaluate", "--members", root / "S", "--members", root / "U6", "--nonmembers", root / "M"]
    with single_thread():
        args += ["--model", model, *QUERY, "--no-meta", "--methods", "loss", "--beyond", "loss"]
        result = CliRunner().invoke(main, [*args, "--out", tmp_path / "ev"])
    assert result.exit_code == 0, result.output
    b = json.loads((tmp_path / "ev" / "evaluation.json").read_text())["beyond_blind"]
    print(
        "(c)",
        {
            k: b[k]
            for k in ("auc_blind", "auc_model", "auc_combined", "delta", "delta_ci_low", "delta_ci_high", "p_value")
        },
    )
    assert b["model"] == "loss:doc_avg" and b["auc_blind"] >= 0.65
    assert b["delta_ci_low"] > 0 and b["p_value"] < 0.05 and b["verdict"] == reading(ADDS, b["blind_kind"])
    assert f"blind + model {b['auc_combined']:.3f}" in result.stdout and reading(ADDS, b["blind_kind"]) in result.stdout


def test_train_card_carries_the_comparison(shifted, tmp_path):
    root, model, _ = shifted
    args = ["train", "--members", root / "S", "--nonmembers", root / "U", "--model", model, *QUERY, *META]
    with single_thread():
        result = CliRunner().invoke(main, [*args, "--out", tmp_path / "clf"])
    assert result.exit_code == 0, result.output
    card = json.loads((tmp_path / "clf" / "card.json").read_text())
    b = card["beyond_blind"]
    assert b["model"] == "meta_classifier" and b["verdict"] == reading(ADDS, b["blind_kind"]) and b["delta_ci_low"] > 0
    assert b["auc_model"] == pytest.approx(card["pooled_bootstrap_95"]["auc"]["point"])
    line = f"delta {b['delta']:+.3f}"
    assert line in result.stdout and line in (tmp_path / "clf" / "card.md").read_text()


def test_report_compares_the_calibration_books(shifted, tmp_path):
    """Book level: the calibration books' mean snippet score is the model's score. The books are the leading 100
    words of excerpts (inside what the target was trained on for ``S``)."""
    root, model, sets = shifted
    for name, src in (("cal_members", "S"), ("cal_nonmembers", "U")):
        (tmp_path / name).mkdir()
        for book, text in list(sets[src].items())[:12]:
            (tmp_path / name / f"{book}.txt").write_text(" ".join(text.split()[:100]))
    audited = [str(p) for p in sorted((root / "U").glob("*.txt"))[-2:]]
    args = ["report", *audited, "--calibrate-members", tmp_path / "cal_members"]
    args += ["--calibrate-nonmembers", tmp_path / "cal_nonmembers", "--model", model, "--methods", "loss"]
    with single_thread():
        result = CliRunner().invoke(main, [*args, "--snippets", "4", "--snippet-words", "30", "--out", tmp_path / "r"])
    assert result.exit_code == 0, result.output
    b = json.loads((tmp_path / "r" / "report.json").read_text())["info"]["beyond_blind"]
    print(
        "report",
        {
            k: b[k]
            for k in ("auc_blind", "auc_model", "auc_combined", "delta", "delta_ci_low", "delta_ci_high", "p_value")
        },
    )
    assert b["model"] == "loss (mean snippet score)" and b["n_members"] == b["n_nonmembers"] == 12
    assert b["auc_model"] >= 0.9 and b["verdict"] == reading(ADDS, b["blind_kind"])
    assert "calibration books, beyond the blind baseline" in result.stdout
    assert b["verdict"].capitalize() in (tmp_path / "r" / "report.html").read_text()  # the sentence starts with it


def test_an_unknown_model_score_is_refused_before_querying(shifted, tmp_path):
    root, model, _ = shifted
    args = ["evaluate", "--members", root / "U6", "--nonmembers", root / "S", "--model", model, *QUERY]
    result = CliRunner().invoke(main, [*args, "--methods", "loss", "--beyond", "zlib"])
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("error: --beyond zlib: 'zlib' is not among")
