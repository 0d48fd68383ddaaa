"""What the model adds over the blind baseline: DeLong's test against its definition and the bootstrap, the paired
interval, the non-negative combiner, and the out-of-fold design (no fit sees the documents it scores)."""

import numpy as np
import pytest
from reference import delong_by_definition
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from docaudit.config import BeyondBlindConfig
from docaudit.inference.comparison import ADDS, NO_EVIDENCE_BEYOND, NOTHING, reading
from docaudit.methods import beyond_blind as bb
from docaudit.methods.blind import BlindFeatures, evaluate_blind
from docaudit.metrics import chunk_folds, delong_test, paired_auc_difference_ci


def _labels(m, n, rng):
    labels = np.r_[np.ones(m, int), np.zeros(n, int)]
    rng.shuffle(labels)
    return labels


def test_delong_equals_its_definition_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(6):
        m, n = (int(v) for v in rng.integers(4, 40, 2))
        labels = _labels(m, n, rng)
        base = np.round(rng.normal(0.6 * labels, 1), 1)  # rounded: many ties
        other = np.round(0.5 * base + rng.normal(0.8 * labels, 1), 1)
        fast = delong_test(labels, base, other)
        auc_base, auc_other, var = delong_by_definition(labels, base, other)
        assert fast.auc_base == pytest.approx(auc_base, abs=1e-12) == pytest.approx(roc_auc_score(labels, base))
        assert fast.auc_other == pytest.approx(auc_other, abs=1e-12)
        assert fast.se**2 == pytest.approx(var, rel=1e-9, abs=1e-15)
        assert fast.p_value == pytest.approx(norm.sf((auc_other - auc_base) / np.sqrt(var)), rel=1e-9)


def test_delong_standard_error_agrees_with_the_paired_bootstrap():
    rng = np.random.default_rng(1)
    labels = _labels(150, 150, rng)
    base = rng.normal(0.8 * labels, 1)
    other = base + rng.normal(1.2 * labels, 1)
    test = delong_test(labels, base, other)
    ci = paired_auc_difference_ci(labels, base, other, n_boot=2000, seed=0)
    assert ci.point == pytest.approx(test.delta)
    assert (ci.hi - ci.lo) / (2 * norm.ppf(0.975)) == pytest.approx(test.se, rel=0.15)
    assert test.p_value < 0.05 and ci.lo > 0


def test_paired_interval_uses_the_same_resamples_for_both_scores():
    rng = np.random.default_rng(2)
    labels = _labels(30, 30, rng)
    scores = rng.normal(labels, 1)
    assert tuple(paired_auc_difference_ci(labels, scores, scores, n_boot=300)) == (0.0, 0.0, 0.0)
    assert delong_test(labels, scores, scores).p_value == 1.0
    shifted = paired_auc_difference_ci(labels, scores, scores + 0.3 * labels, n_boot=300, seed=4)
    assert shifted == paired_auc_difference_ci(labels, scores, scores + 0.3 * labels, n_boot=300, seed=4)
    assert 0 < shifted.lo <= shifted.point <= shifted.hi


def test_combiner_weights_are_never_negative():
    rng = np.random.default_rng(3)
    y = _labels(40, 40, rng)
    X = np.column_stack([rng.normal(y, 1), rng.normal(-y, 1)])  # the second score points the wrong way
    weights, _ = bb.nonnegative_logistic(X, y)
    assert weights[0] > 0 and weights[1] == 0
    weights, _ = bb.nonnegative_logistic(X[:, ::-1], y)
    assert weights[0] == 0 and weights[1] > 0
    weights, _ = bb.nonnegative_logistic(np.column_stack([-X[:, 0], X[:, 1]]), y)  # both wrong: the first alone
    assert tuple(weights) == (1.0, 0.0)


def _synthetic(seed, model_signal):
    """Documents whose sets differ by a shift the blind score sees, with a model score carrying ``model_signal``
    of independent membership evidence."""
    rng = np.random.default_rng(seed)
    labels = _labels(60, 60, rng)
    blind = rng.normal(1.0 * labels, 1)
    model = rng.normal(model_signal * labels, 1)
    return labels, blind, model


def test_beyond_blind_finds_added_evidence():
    labels, blind, model = _synthetic(5, 1.5)
    folds = chunk_folds(labels, 5, 0)
    found = bb.beyond_blind(labels, folds, bb.fixed_scorer(blind), bb.fixed_scorer(model)).as_json()
    assert found["verdict"] == reading(ADDS, None) and found["delta_ci_low"] > 0 and found["p_value"] < 0.05
    assert found["auc_combined"] > max(found["auc_blind"], found["auc_model"])
    assert set(found) >= {
        "auc_blind",
        "auc_model",
        "auc_combined",
        "delta",
        "delta_ci_low",
        "delta_ci_high",
        "p_value",
        "test",
        "verdict",
    }


def test_a_model_without_evidence_is_not_credited():
    """20 sets where the model's score is noise: never a verdict of added evidence, delta near 0 on average (a
    little below: the combiner pays for the weight it fits on noise). How often the interval leaves 0 is a rate,
    checked over 600 sets in test_null_rate_of_adds_evidence_is_at_most_nominal."""
    runs = []
    for seed in range(20):
        labels, blind, model = _synthetic(100 + seed, 0.0)
        folds = chunk_folds(labels, 5, seed)
        config = BeyondBlindConfig(n_boot=300)
        runs.append(bb.beyond_blind(labels, folds, bb.fixed_scorer(blind), bb.fixed_scorer(model), config=config))
    out = [r.as_json() for r in runs]
    assert all(r.verdict in (NO_EVIDENCE_BEYOND, NOTHING) for r in runs)
    assert abs(np.mean([o["delta"] for o in out])) < 0.02


def test_no_fit_sees_the_documents_it_scores():
    """Spy scorers record every fit: inner fits stay inside the outer training fold, and nothing that scores a
    document was fit on it."""
    rng = np.random.default_rng(7)
    labels, blind, model = _synthetic(7, 1.0)
    folds = chunk_folds(labels, 4, 0)
    calls = []

    def spy(scores):
        def score(fold, train, test):
            calls.append((fold, set(train.tolist()), set(test.tolist())))
            return scores[test] + rng.normal(0, 0.01, len(test))

        return score

    bb.beyond_blind(labels, folds, spy(blind), spy(model), config=BeyondBlindConfig(inner_folds=3))
    assert len(calls) == 2 * (4 + 4 * 3)  # outer and inner fits of both scores
    for fold, train, test in calls:
        assert not train & test
        outer_train, outer_test = (set(part.tolist()) for part in folds[fold])
        assert train <= outer_train  # no fit ever uses a test document of its outer fold
        assert test == outer_test or test <= outer_train


def test_too_few_documents_is_reported_not_raised():
    texts = [f"the {w} sat on the mat in {1800 + i}" for i, w in enumerate("cat dog hen cow pig owl".split())]
    labels = np.array([1, 1, 1, 0, 0, 0])
    folds = chunk_folds(labels, 2, 0)
    features = BlindFeatures(texts)
    blind = evaluate_blind(features, labels, folds, kinds=("dates",))
    out = bb.against_blind(labels, folds, features, blind, bb.Candidate("loss", bb.fixed_scorer(np.arange(6.0))))
    assert out["model"] == "loss" and "inner folds need at least" in out["unavailable"]


def test_fold_offsets_of_the_blind_classifier_do_not_credit_a_noise_model():
    """A blind classifier whose scores carry a different offset in each outer fold (as classifiers refit on
    different documents do) and a model score that is pure noise: the blind baseline goes through the same
    per-fold combiner as the combined score, so the offsets favour neither and the model is not credited."""
    rng = np.random.default_rng(11)
    labels = _labels(60, 60, rng)
    signal = rng.normal(1.2 * labels, 1)
    noise = rng.normal(size=len(labels))
    folds = chunk_folds(labels, 5, 0)
    fold_of = np.empty(len(labels), int)
    for i, (_, test) in enumerate(folds):
        fold_of[test] = i

    def offset_blind(fold, train, test):  # the offset depends on the fitted classifier, i.e. on the outer fold
        return signal[test] + 4.0 * fold

    out = bb.beyond_blind(labels, folds, offset_blind, bb.fixed_scorer(noise), config=BeyondBlindConfig(n_boot=300))
    result = out.as_json()
    assert out.verdict != ADDS and result["delta_ci_low"] <= 0
    assert result["auc_blind_raw"] < result["auc_blind"] - 0.1  # the pooled raw scores suffer from the offsets
    assert abs(result["delta"]) < 0.05


def test_a_model_weighted_in_no_fold_adds_nothing_by_construction():
    """A model score pointing the wrong way gets weight 0 in every fold: the combined score is then the blind
    baseline's, delta is exactly 0, and the verdict says the model adds nothing."""
    labels, blind, _ = _synthetic(21, 0.0)
    wrong = -3.0 * labels + np.random.default_rng(21).normal(0, 0.1, len(labels))
    folds = chunk_folds(labels, 5, 0)
    result = bb.beyond_blind(labels, folds, bb.fixed_scorer(blind), bb.fixed_scorer(wrong))
    out = result.as_json()
    assert out["folds_model_weighted"] == 0 and result.verdict == NOTHING and out["verdict"] == reading(NOTHING, None)
    assert np.array_equal(result.combined, result.baseline) and out["delta"] == 0.0


def test_delong_without_a_variance_estimate_gives_no_p_value():
    """A constant score against one that separates a handful of documents: the placement values do not vary, so
    DeLong's variance is 0; a positive difference then gets no p-value, with the reason."""
    labels = np.array([1, 1, 1, 0, 0, 0])
    test = delong_test(labels, np.zeros(6), labels.astype(float))
    assert test.delta == 0.5 and test.p_value is None and "variance estimate" in test.reason
    assert delong_test(labels, labels.astype(float), np.zeros(6)).p_value == 1.0


def _null_simulation():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "nulls" / "null_beyond_blind.py"
    spec = importlib.util.spec_from_file_location("null_beyond_blind", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_null_rate_of_adds_evidence_is_at_most_nominal():
    """600 sets of 30 + 30 documents whose blind score separates them (as a shift does) with an offset of its own
    in each outer fold (as classifiers refit on different documents have), and a model score that is pure noise;
    the scores are simulated directly, so each set takes a fraction of a second. "Adds evidence" may fire in at
    most 48 of 600 (the 99.9th percentile of Binomial(600, 0.05)); a doubled rate (10%) exceeds that with
    probability 0.94. (Comparing with the raw pooled blind scores, which the fold offsets lower, fails it.) The 95%
    interval of the AUC gain credits the noise (its lower end above 0) at most 22 times (the 95th percentile of
    Binomial(600, 0.025)); a doubled rate (5%) exceeds that with probability 0.92."""
    from scipy.stats import binom

    config, adds, credited = BeyondBlindConfig(n_boot=200), 0, 0
    for seed in range(600):
        rng = np.random.default_rng([7, seed])
        labels = _labels(30, 30, rng)
        signal, noise, offsets = rng.normal(labels, 1), rng.normal(size=60), rng.normal(0, 2, config.folds)
        folds = chunk_folds(labels, config.folds, seed)
        blind = lambda fold, train, test, s=signal, o=offsets: s[test] + o[fold]  # noqa: E731
        result = bb.beyond_blind(labels, folds, blind, bb.fixed_scorer(noise), config=config, seed=seed)
        adds += result.verdict == ADDS
        credited += result.as_json()["delta_ci_low"] > 0
    assert adds <= binom.ppf(0.999, 600, 0.05)
    assert binom.sf(binom.ppf(0.95, 600, 0.025), 600, 0.05) >= 0.9  # the check sees a doubled rate
    assert credited <= binom.ppf(0.95, 600, 0.025), credited


def test_null_simulation_script_runs_both_nulls():
    """scripts/nulls/null_beyond_blind.py (its rates, with a real blind classifier refit on every fold, are in
    docs/methods.md): a noise model and a model that follows an era the texts do not show."""
    module = _null_simulation()
    for era in (0.0, 1.0):
        result = module.run(12, 2, seed=1, n_boot=50, era=era)
        assert result["repetitions"] == 2 and result["era"] == era
        assert result["adds_evidence_rate"] * 2 in (0, 1, 2)  # a count of the 2 repetitions
        low, high = result["adds_evidence_95ci"]
        assert low <= result["adds_evidence_rate"] <= high
        assert 0.55 < result["mean_blind_auc"]  # the blind classifier does separate the sets
        # the era the model follows and the texts do not show: its score separates the sets only when era > 0
        assert (result["mean_model_auc"] > 0.7) is (era > 0), result["mean_model_auc"]


def test_the_report_page_states_the_comparison_as_one_sentence():
    from docaudit.report.tables import beyond_blind_sentence

    beyond = {
        "verdict": reading(ADDS, "tfidf"),
        "blind_kind": "tfidf",
        "model": "loss",
        "auc_blind": 0.661,
        "auc_combined": 0.812,
        "delta": 0.151,
        "confidence": 0.95,
        "delta_ci_low": 0.05,
        "delta_ci_high": 0.249,
        "p_value": 0.0031,
    }
    assert beyond_blind_sentence(beyond) == (
        "The model adds evidence beyond what the tfidf blind classifier separates (membership, or a difference "
        "between the sets that this classifier does not see): on the calibration books, the tfidf blind classifier "
        "of the texts tells them apart with AUC 0.66 and it together with the model (loss) with 0.81, a difference "
        "of +0.15 (95% interval +0.05 to +0.25; DeLong one-sided p = 0.0031)."
    )
    assert beyond_blind_sentence({"unavailable": "too few books"}).endswith("not computed: too few books.")
    assert beyond_blind_sentence(None) == ""
