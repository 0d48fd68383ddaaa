import numpy as np
import pytest

from docaudit.methods.meta.features import DocumentFeatures
from docaudit.methods.meta.normalize import (
    TokenNormalizer,
    gp_dictionary,
    tf_dictionary,
)
from docaudit.query.stats import TokenStats


def stats(ids, logp, max_logp, gp_sum=None, vocab=4):
    ids = np.array(ids, dtype=np.int32)
    n = len(ids) - 1
    return TokenStats(
        ids,
        np.array(logp, np.float32),
        np.array(max_logp, np.float32),
        np.zeros(n, np.float32),
        np.ones(n, np.float32),
        None if gp_sum is None else np.array(gp_sum, float),
        vocab,
        8,
        7,
    )


def test_tf_dictionary_counts_and_unseen():
    docs = [stats([0, 1, 1], [-1, -2], [-1, -1]), stats([1, 2], [-1], [-1])]
    # counts [1, 3, 1, 0] of 5 tokens; unseen token 3 gets min(nonzero) / 2 = 0.1
    np.testing.assert_allclose(tf_dictionary(docs), [0.2, 0.6, 0.2, 0.1])


def test_gp_dictionary_is_mean_softmax_over_scored_positions():
    docs = [
        stats([0, 1, 2], [-1, -1], [-1, -1], gp_sum=[1.0, 0.6, 0.4, 0.0]),
        stats([1, 2], [-1], [-1], gp_sum=[0.2, 0.2, 0.6, 0.0]),
    ]
    # (sum of softmax sums) / (2 + 1 scored positions); token 3 never predicted -> min / 2
    np.testing.assert_allclose(gp_dictionary(docs), [0.4, 0.8 / 3, 1.0 / 3, 0.8 / 6])


def test_normalizations_by_hand():
    p, pmax = np.array([0.5, 0.1]), np.array([0.5, 0.8])
    doc = stats([0, 1, 2], np.log(p), np.log(pmax))
    train = [doc, stats([1, 1, 1, 3], [-1, -1, -1], [-1, -1, -1])]
    tf = np.array([1, 4, 1, 1]) / 7  # tokens 0,1,2 + 1,1,1,3 over 7
    ref = tf[[1, 2]]
    expect = {
        "none": -np.log(p),
        "ratio_tf": -np.log(p / ref),
        "max_tf": -np.log((1 - (pmax - p)) / ref),
    }
    for method, want in expect.items():
        got = TokenNormalizer(method).fit(train).transform([doc])[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=method)


def test_maxnorm_epsilon_floors_the_numerator():
    doc = stats([0, 1], [np.log(1e-30)], [0.0])  # p ~ 0 and p_max = 1: numerator 1 - (1 - 0) = 0
    norm = TokenNormalizer("max_tf", eps=1e-5).fit([doc])
    assert norm.transform([doc])[0][0] == pytest.approx(-np.log(1e-5 / norm.reference_[1]))


def test_normalizer_dictionary_comes_from_training_documents_only():
    a, b = stats([0, 0, 0], [-1, -1], [-1, -1]), stats([3, 3, 3], [-1, -1], [-1, -1])
    norm = TokenNormalizer("ratio_tf").fit([a])
    np.testing.assert_allclose(norm.reference_, [1.0, 0.5, 0.5, 0.5])
    # the held-out document's token 3 gets the unseen-token value, not a frequency learned from it
    np.testing.assert_allclose(norm.transform([b])[0], -(-1 - np.log(0.5)) * np.ones(2), rtol=1e-6)


def test_agg_features_by_hand():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    feats = DocumentFeatures("agg").fit([values]).transform([values])[0]
    np.testing.assert_allclose(feats[:4], [2.5, 1.0, 4.0, np.std(values)])
    np.testing.assert_allclose(feats[4:], np.percentile(values, [1, 5, 10, 25, 50, 75, 90, 95, 99]))
    assert len(DocumentFeatures("agg", token_count=True).fit([values]).transform([values])[0]) == 14


def test_hist_bins_fit_on_training_values_and_clip_outliers():
    hist = DocumentFeatures("hist", bins=5).fit([np.array([0.0, 10.0]), np.array([5.0])])
    np.testing.assert_allclose(hist.edges_, [0, 2, 4, 6, 8, 10])
    # -5 clips into the first bin, 11 into the last; nothing is dropped
    np.testing.assert_allclose(hist.transform([np.array([-5.0, 1.0, 3.0, 11.0])])[0], [0.5, 0.25, 0, 0, 0.25])


def test_tpr_at_fpr_keeps_collinear_roc_points():
    from docaudit.metrics import tpr_at_fpr

    # ROC points: (0, 1/6) at score 3, (1/4, 2/3) at score 2, ... The point (1/4, 1/2) reached at score 2 is on a
    # straight segment, so roc_curve's default drop_intermediate removes it and a 25% FPR budget would see 1/6.
    labels = [1, 1, 1, 0, 1, 1, 1, 0, 0, 0]
    scores = [2, 1, 1, 2, 2, 0, 3, 1, 0, 0]
    assert tpr_at_fpr(labels, scores, 0.25) == 0.5
