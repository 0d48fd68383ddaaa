import numpy as np
import pytest
from labtarget import TINY, mean_logp, single_thread, tiny_target
from sklearn.metrics import roc_auc_score, roc_curve

from docaudit.audit.dataset_level import dataset_test
from docaudit.errors import DocauditError
from docaudit.metrics import LOW_FPRS, bootstrap_ci, fold_metrics, min_nonmembers, pooled_oof_ci, summarize
from docaudit.report.tables import format_summary


def _scores(n_pos, n_neg, shift=1.0, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    return labels, np.r_[rng.normal(shift, 1, n_pos), rng.normal(0, 1, n_neg)]


def test_bootstrap_contains_point_and_is_seeded():
    labels, scores = _scores(60, 60)
    ci = bootstrap_ci(labels, scores, n_boot=500, seed=1)
    assert set(ci) == {"auc", "tpr_at_10fpr", "tpr_at_1fpr"}
    assert ci["tpr_at_1fpr"] is None  # 60 non-members cannot estimate TPR at 1% FPR
    for point, lo, hi in (ci["auc"], ci["tpr_at_10fpr"]):
        assert lo <= point <= hi
    assert ci["auc"].point == pytest.approx(roc_auc_score(labels, scores))
    assert ci == bootstrap_ci(labels, scores, n_boot=500, seed=1)
    assert ci != bootstrap_ci(labels, scores, n_boot=500, seed=2)


def test_bootstrap_tpr_uses_every_roc_point():
    # ties in a coarse score make straight ROC segments; the best point on them must not be skipped
    rng = np.random.default_rng(3)
    for _ in range(50):
        labels, scores = _scores(25, 21, seed=int(rng.integers(1 << 30)))
        scores = np.round(scores, 1)
        ci = bootstrap_ci(labels, scores, n_boot=2)
        fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
        for f in LOW_FPRS:
            if f * 21 < 1:  # 21 non-members: TPR at 1% FPR is not estimated
                assert ci[f"tpr_at_{round(f * 100)}fpr"] is None
                continue
            assert ci[f"tpr_at_{round(f * 100)}fpr"].point == pytest.approx(tpr[fpr <= f + 1e-12].max())


def test_tpr_at_fpr_needs_enough_nonmembers():
    # TPR at FPR f is estimated only from at least 1/f non-members: with 2, the only threshold with FPR <= 1% is
    # the one no non-member passes, so the value is None (null in JSON); with 100 it is a number, equal to the
    # direct ROC computation
    labels, scores = _scores(10, 2)
    ci = bootstrap_ci(labels, scores, n_boot=20)
    assert ci["tpr_at_1fpr"] is None and ci["tpr_at_10fpr"] is None and ci["auc"] is not None
    fold = fold_metrics(labels, scores)
    assert fold.tpr_at == {0.1: None, 0.01: None}
    summary = summarize([fold, fold_metrics(*_scores(50, 150))])
    assert summary["tpr_at_1fpr_mean"] is None and summary["tpr_at_1fpr_std"] is None
    assert format_summary(summary).endswith("TPR@1%FPR n/a (needs ≥ 100 non-members per fold)")
    labels, scores = _scores(100, 100)
    ci = bootstrap_ci(labels, scores, n_boot=20)
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    assert ci["tpr_at_1fpr"].point == pytest.approx(tpr[fpr <= 0.01 + 1e-12].max())
    assert fold_metrics(labels, scores).tpr_at[0.01] == pytest.approx(tpr[fpr <= 0.01 + 1e-12].max())
    assert (min_nonmembers(0.1), min_nonmembers(0.05), min_nonmembers(0.01)) == (10, 20, 100)
    assert bootstrap_ci(*_scores(10, 9), n_boot=5)["tpr_at_10fpr"] is None
    assert bootstrap_ci(*_scores(10, 10), n_boot=5)["tpr_at_10fpr"] is not None


def test_bootstrap_narrows_with_more_documents():
    small = bootstrap_ci(*_scores(30, 30), seed=0)
    large = bootstrap_ci(*_scores(300, 300), seed=0)
    width = lambda iv: iv.hi - iv.lo  # noqa: E731
    assert width(large["auc"]) < 0.5 * width(small["auc"])
    assert width(large["tpr_at_10fpr"]) < width(small["tpr_at_10fpr"])


def test_bootstrap_ci_matches_a_slow_reference():
    """The vectorized resamples (AUC by ranks, TPR from the sorted non-members) against sklearn's ``roc_auc_score``
    and the full ROC curve on each of the same resamples, one at a time."""
    from docaudit.metrics import stratified_resamples

    labels, scores = _scores(23, 31, shift=0.8, seed=9)
    scores = np.round(scores, 1)  # ties, where rank and ROC conventions could part
    pos, neg = scores[labels == 1], scores[labels == 0]
    aucs, tprs = [], []
    for ip, ineg in stratified_resamples(len(pos), len(neg), 100, seed=4):
        for a, b in zip(ip, ineg):
            y = np.r_[np.ones(len(a)), np.zeros(len(b))]
            s = np.r_[pos[a], neg[b]]
            aucs.append(roc_auc_score(y, s))
            fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
            tprs.append(tpr[fpr <= 0.1 + 1e-12].max())
    ci = bootstrap_ci(labels, scores, n_boot=100, alpha=0.1, seed=4)
    assert ci["auc"].lo == pytest.approx(np.quantile(aucs, 0.05)) and ci["auc"].hi == pytest.approx(
        np.quantile(aucs, 0.95)
    )
    assert ci["tpr_at_10fpr"][1:] == pytest.approx(tuple(np.quantile(tprs, [0.05, 0.95])))


@pytest.mark.slow
def test_bootstrap_auc_interval_covers_the_true_auc():
    """Coverage where the truth is known: members N(1, 1) and non-members N(0, 1), AUC = Phi(1 / sqrt 2) = 0.760;
    400 repetitions of 50 + 50 documents (power >= 0.9 to see a miss rate of 10% against the nominal 5%). Measured:
    the 95% interval missed 5.25% of the time (2.25% below, 3% above)."""
    from scipy.stats import norm

    true, misses = norm.cdf(1 / np.sqrt(2)), 0
    for r in range(400):
        labels, scores = _scores(50, 50, seed=1000 + r)
        ci = bootstrap_ci(labels, scores, n_boot=400, seed=r, fprs=())["auc"]
        misses += not ci.lo <= true <= ci.hi
    assert misses / 400 <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / 400), misses


def test_pooled_out_of_fold():
    labels, scores = _scores(50, 50)
    folds = [(labels[i::5], scores[i::5]) for i in range(5)]
    pooled = pooled_oof_ci(folds, n_boot=200)
    order = np.concatenate([np.arange(i, 100, 5) for i in range(5)])
    assert pooled == bootstrap_ci(labels[order], scores[order], n_boot=200)
    with pytest.raises(DocauditError):
        bootstrap_ci([1, 0, 0], [0.1, 0.2, 0.3])
    with pytest.raises(DocauditError):
        pooled_oof_ci([])


def test_dataset_test_detects_shift():
    rng = np.random.default_rng(0)
    suspect = rng.normal(size=(40, 3))
    suspect[:, 0] += 1.5  # one detector sees the memorized set
    nonmember = rng.normal(size=(40, 3))
    res = dataset_test(suspect, nonmember)
    assert res.p_value < 0.01 and res.effect > 0 and res.statistic > 0.5
    assert (res.n_suspect, res.n_nonmember, res.n_splits, len(res.split_p_values)) == (40, 40, 10, 10)
    assert res.p_value == pytest.approx(min(1.0, 2 * np.median(res.split_p_values)))
    assert "not proof" in res.meaning and "same distribution" in res.meaning
    assert dataset_test(suspect, nonmember) == res


@pytest.mark.slow
def test_dataset_test_null_is_not_systematically_small():
    """600 null data sets of 24 + 24 (one split each): p < 0.05 at most 5% + 2.33 binomial standard errors (a
    bound of 7.1%, which Binomial(600, 0.10) exceeds with probability 0.99: a doubled rate is seen), the mean near
    1/2; combined over 5 splits, never below 0.05 in 10 sets (twice the median is conservative)."""
    from scipy.stats import binom
    from threadpoolctl import threadpool_limits

    single, combined = [], []
    with threadpool_limits(1):  # 600 small logistic fits: far faster on one thread on a shared machine
        for seed in range(600):
            rng = np.random.default_rng(100 + seed)
            a, b = rng.normal(size=(24, 2)), rng.normal(size=(24, 2))
            single.append(dataset_test(a, b, seed=seed, n_splits=1).p_value)
            if seed < 10:
                combined.append(dataset_test(a, b, seed=seed, n_splits=5).p_value)
    single = np.array(single)
    bound = 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / 600)
    assert binom.sf(np.floor(bound * 600), 600, 0.10) >= 0.9
    assert (single < 0.05).mean() <= bound, (single < 0.05).mean()
    assert 0.45 < single.mean() < 0.55  # 600 uniform values: standard error 0.012
    assert min(combined) > 0.05


def test_dataset_test_errors():
    with pytest.raises(DocauditError, match="at least 4"):
        dataset_test(np.zeros((3, 2)), np.zeros((10, 2)))
    with pytest.raises(DocauditError, match="different numbers of features"):
        dataset_test(np.zeros((10, 2)), np.zeros((10, 3)))
    with pytest.raises(DocauditError, match="NaN"):
        dataset_test(np.full((10, 1), np.nan), np.zeros((10, 1)))
    # constant scores carry no evidence
    assert dataset_test(np.ones(8), np.ones(8)).p_value == 1.0


def test_dataset_test_on_a_trained_target():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir, members, nonmembers = tiny_target()
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with single_thread():
        m = mean_logp(model, tok, members, TINY.positions, TINY.doc_tokens)
        n = mean_logp(model, tok, nonmembers, TINY.positions, TINY.doc_tokens)
    trained = dataset_test(m, n)
    assert trained.p_value < 0.01 and trained.effect > 0
    half = len(n) // 2
    null = dataset_test(n[:half], n[half:])
    assert null.p_value > 0.05


@pytest.mark.slow
def test_dataset_test_is_one_sided_in_the_member_direction():
    """Suspects that are the *less* member-like set (a detector scores them lower) get a large p-value: a fitted
    negative weight must not turn the difference into evidence."""
    rng = np.random.default_rng(3)
    nonmember = rng.normal(size=(40, 3))
    reversed_set = rng.normal(size=(40, 3))
    reversed_set[:, 0] -= 1.5
    assert dataset_test(reversed_set, nonmember).p_value > 0.5
    assert dataset_test(nonmember, reversed_set).p_value < 0.01  # the same sets the right way round


@pytest.mark.slow
def test_dataset_test_p_by_size():
    """The p-value by number of suspects is the same test on random subsets of them (recomputed here)."""
    rng = np.random.default_rng(4)
    suspect, nonmember = rng.normal(size=(30, 2)), rng.normal(size=(24, 2))
    suspect[:, 1] += 1.0
    res = dataset_test(suspect, nonmember, seed=2)
    check = np.random.default_rng([2, 1])
    assert [row["n_suspect"] for row in res.p_by_size] == [5, 10, 20, 30]
    chosen = check.choice(30, size=5, replace=False)
    assert res.p_by_size[0]["p_value"] == dataset_test(suspect[chosen], nonmember, seed=2).p_value
    assert res.p_by_size[-1]["p_value"] == res.p_value
    assert not hasattr(res, "self_check_p_value")  # uniform on any data: it could not fail (docs/methods.md)


def test_dataset_test_split_p_value_is_the_permutation_p_value():
    """Two documents per half: 6 ways to split half B's 4 documents, so the p-value of one split is never below
    1/6, however far apart the sets (a t-test on 2 against 2 documents gives a small one)."""
    rng = np.random.default_rng(5)
    suspect, nonmember = rng.normal(10, 1, size=(4, 2)), rng.normal(0, 1, size=(4, 2))
    assert dataset_test(suspect, nonmember, n_splits=1).p_value == pytest.approx(1 / 6)


@pytest.mark.parametrize("halves", [(5, 50), (2, 2), (4, 4)])
def test_dataset_test_split_test_holds_its_level(halves):
    """Under H0 half B's combined scores are exchangeable between suspects and non-members; with few suspects,
    many non-members and skewed scores (a long tail towards non-member-like, as a mean log-probability has) Welch's
    test rejected at 15% at 5 against 50. 600 null draws: the rate of p < 0.05 may not exceed the 99.9th
    percentile of Binomial(600, 0.05) (8.2%), which a doubled rate (10%) exceeds with probability 0.92."""
    from scipy.stats import binom

    from docaudit.audit.dataset_level import _one_split

    n_s, n_n = halves
    rng = np.random.default_rng(n_s * 100 + n_n)
    p = np.array([_one_split(-rng.exponential(size=n_s), -rng.exponential(size=n_n))[0] for _ in range(600)])
    assert np.sum(p < 0.05) <= binom.ppf(0.999, 600, 0.05)


def _texts(n, years, rng):
    words = "river stone lamp market winter letter garden window harbour bread".split()
    return [" ".join(rng.choice(words, 120)) + f" written in {rng.choice(years)}" for _ in range(n)]


@pytest.mark.slow
def test_dataset_test_blind_p_value_and_verdict():
    """Sets that differ as text (an era the dates give away): the blind p-value is small and the verdict is
    inconclusive however small the model's p-value; sets alike as text: the model's p-value decides."""
    from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE
    from docaudit.methods.blind import BlindFeatures

    rng = np.random.default_rng(5)
    suspect, nonmember = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    suspect[:, 0] += 1.5
    shifted = BlindFeatures(_texts(30, range(1990, 2020), rng) + _texts(30, range(1850, 1880), rng))
    res = dataset_test(suspect, nonmember, blind=shifted, blind_kind="dates")
    assert res.p_value < 0.01 and res.p_value_blind < 0.01
    assert res.verdict["verdict"] == INCONCLUSIVE and "blind" in res.verdict["reason"]
    assert res.rely_on.startswith("Rely on neither")
    alike = BlindFeatures(_texts(60, range(1850, 2020), rng))
    res = dataset_test(suspect, nonmember, blind=alike, blind_kind="dates")
    assert res.p_value_blind > 0.05 and res.verdict["verdict"] == EVIDENCE
    assert res.rely_on.startswith("Rely on the model's p-value")
    assert dataset_test(suspect, nonmember).verdict["verdict"] == INCONCLUSIVE  # no texts, no blind test


def test_dataset_test_text_output_names_every_check():
    from docaudit.report.tables import format_dataset_checks

    rng = np.random.default_rng(6)
    res = dataset_test(rng.normal(size=(12, 2)) + [1.0, 0.0], rng.normal(size=(12, 2)), n_splits=3)
    text = format_dataset_checks(res)
    assert "blind baseline: not computed (no texts were given" in text and res.rely_on in text
    assert "self-check" not in text
    assert "p-value by number of suspect documents: 5: " in text and f"12: {res.p_value:.3g}" in text
    assert text.splitlines()[-1] == f"verdict: inconclusive ({res.verdict['reason']})"
