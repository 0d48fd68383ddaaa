"""``predict``'s full-conformal p-value: against a slow reference written out here, and its level under the null
by a simulation sized to see a doubled rate (one that a p-value against in-sample scores fails)."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from docaudit.errors import DocauditError
from docaudit.inference.conformal import FullConformal, conformal_p, insert_position


def forest(seed=0, trees=20):
    return RandomForestClassifier(n_estimators=trees, max_depth=5, min_samples_leaf=3, random_state=seed, n_jobs=1)


def test_conformal_p_counts_ties_against_the_document():
    null = [0.1, 0.5, 0.5, 0.9]
    assert conformal_p(0.5, null) == (1 + 3) / 5 and conformal_p(1.0, null) == 1 / 5 and conformal_p(0.0, null) == 1
    with pytest.raises(DocauditError):
        conformal_p(float("nan"), null)


def slow_full_conformal(X, y, x, key, seed):
    """The p-value written out: the row inserted among the non-members at its slot, the forest refit, each row's
    out-of-bag probability from the trees whose bootstrap sample (drawn from the tree's seed) left it out, and
    the rank of the row's among the non-members'."""
    from sklearn.ensemble._forest import _generate_sample_indices

    members, nonmembers = X[y == 1], X[y == 0]
    at = insert_position(len(nonmembers), seed, key)
    train = np.r_[members, nonmembers[:at], x[None], nonmembers[at:]]
    labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers) + 1)].astype(int)
    model = forest(seed).fit(train, labels)
    total, count = np.zeros(len(train)), np.zeros(len(train))
    for tree in model.estimators_:
        inbag = np.zeros(len(train), dtype=bool)
        inbag[_generate_sample_indices(tree.random_state, len(train), len(train), None)] = True
        total[~inbag] += tree.predict_proba(train[~inbag])[:, 1]
        count[~inbag] += 1
    oob = (total / count)[len(members) :]
    mine, others = oob[at], np.r_[oob[:at], oob[at + 1 :]]
    return (1 + sum(o >= mine for o in others)) / (len(others) + 1)


def test_full_conformal_matches_a_slow_reference():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(1, 1, (15, 3)), rng.normal(0, 1, (25, 3))]
    y = np.r_[np.ones(15), np.zeros(25)].astype(int)
    new = rng.normal(0.5, 1, (4, 3))
    keys = [f"doc{i}" for i in range(4)]
    fitted = FullConformal(forest(7), seed=7).fit(X, y)
    p = fitted.p_values(new, keys)
    assert p == pytest.approx([slow_full_conformal(X, y, x, k, 7) for x, k in zip(new, keys)])
    assert len(fitted.scores_) == 4 and all(len(null) == 25 for _, null in fitted.scores_)
    assert p.min() >= 1 / 26
    with pytest.raises(DocauditError):
        fitted.p_values(new[:, :2], keys)


@pytest.mark.slow
def test_full_conformal_holds_its_level_where_in_sample_scores_do_not():
    """500 independent data sets (20 known members shifted by 1 on 3 features, 20 known non-members), one new
    non-member each. Full conformal: p <= 0.05 (exact rate 1/21 = 4.8%) at most 0.05 + 1.645 standard errors (a
    doubled rate would pass this bound with probability about 2%). The same new non-members ranked against the
    non-members' in-sample scores of a forest fit on all training rows (what a p-value from the final classifier
    alone would be) exceed the bound: the check can fail."""
    rng = np.random.default_rng(2)
    reps, full, naive = 500, 0, 0
    for rep in range(reps):
        X = np.r_[rng.normal(1, 1, (20, 3)), rng.normal(0, 1, (20, 3))]
        y = np.r_[np.ones(20), np.zeros(20)].astype(int)
        x = rng.normal(0, 1, (1, 3))
        full += int(FullConformal(forest(rep, 10), seed=rep).fit(X, y).p_values(x, [str(rep)])[0] <= 0.05)
        model = forest(rep, 10).fit(X, y)
        naive += int(conformal_p(model.predict_proba(x)[0, 1], model.predict_proba(X[y == 0])[:, 1]) <= 0.05)
    bound = 0.05 + 1.645 * np.sqrt(0.05 * 0.95 / reps)
    assert full / reps <= bound, (full, reps)
    assert naive / reps > bound, (naive, reps)
