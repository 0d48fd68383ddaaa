"""Blind (model-free) baselines: they must see the PG-19 vs post-2024 shift, and see nothing in a random split."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from conftest import CORPUS
from sklearn.metrics import roc_auc_score

from docaudit.corpus.cleaning import clean_text
from docaudit.corpus.documents import read_text
from docaudit.errors import DocauditError
from docaudit.methods.blind import (
    KINDS,
    DocFreqSelector,
    YearFeatures,
    blind_scores,
    evaluate_blind,
    shift_warning,
    years_mentioned,
)
from docaudit.metrics import chunk_folds

# speed: clean only the first RAW_CHARS characters of each file (headers are a few thousand characters; the END
# marker is then missing, which strip_gutenberg handles) and give the baselines the first MAX_CHARS of the result
RAW_CHARS = 40_000
MAX_CHARS = 10_000


def load_group(group: str, n: int | None, seed: int) -> list[str]:
    files = sorted((CORPUS / group).glob("*.txt"))
    if n is not None:
        files = random.Random(seed).sample(files, n)
    return [clean_text(read_text(f)[:RAW_CHARS])[:MAX_CHARS] for f in files]


def test_blind_baseline_sees_the_pg19_vs_post2024_shift():
    # 150 random members vs all 150 non-members. With only 30 + 30 books the test folds hold 6 + 6 documents and
    # the mean AUC over folds is itself noisy (sd about 0.08 under the null), so a fixed 0.8 bar would be a coin
    # flip even though the shift is real; with 30 + 30 per fold the best kind reaches about 0.85 on 10k characters.
    members, nonmembers = load_group("members", 150, seed=1), load_group("nonmembers", None, seed=0)
    texts, labels = members + nonmembers, np.array([1] * len(members) + [0] * len(nonmembers))
    folds = chunk_folds(labels, 5, seed=0)
    result = evaluate_blind(texts, labels, folds, max_chars=MAX_CHARS)
    assert set(result["kinds"]) == set(KINDS)
    for kind in KINDS:
        scores = result["kinds"][kind]["scores"]
        assert not np.isnan(scores).any()  # every document scored once, out of fold
        # each fold's AUC is that of the out-of-fold scores of its test documents
        expected = [roc_auc_score(labels[test], scores[test]) for _, test in folds]
        assert [f.auc for f in result["kinds"][kind]["folds"]] == pytest.approx(expected), kind
    assert result["blind_auc"] == max(result["kinds"][k]["summary"]["auc_mean"] for k in KINDS)
    assert result["blind_auc"] >= 0.8, {k: v["summary"]["auc_mean"] for k, v in result["kinds"].items()}
    assert shift_warning(result["blind_auc"]) is not None


def null_auc_sd(n_pos: int, n_neg: int) -> float:
    """Standard deviation of the AUC of scores unrelated to the labels (Mann-Whitney null, no ties):
    Var = (n_pos + n_neg + 1) / (12 n_pos n_neg)."""
    return math.sqrt((n_pos + n_neg + 1) / (12 * n_pos * n_neg))


def test_blind_baseline_on_a_random_split_of_one_group_is_chance():
    # All 250 members, labels assigned at random (125/125, seeded): nothing separates the halves, so every kind's
    # mean AUC over 5 folds should be 0.5 up to sampling noise. Each test fold holds 25 + 25 documents, so the null
    # AUC of one fold has sd sqrt(51 / (12 * 625)) = 0.082 and the mean over the 5 (disjoint) folds has
    # sd 0.082 / sqrt(5) = 0.037; we allow 3 sd = 0.11. (With 60 books, 6 + 6 per fold, 3 sd would be 0.23, wider
    # than the 0.10 gap between chance and the warning threshold, so the no-warning check below would mean little;
    # with 250 books a mean AUC >= 0.60 is a 2.7 sd event, p < 0.4% per kind.)
    texts = load_group("members", None, seed=0)
    assert len(texts) == 250
    labels = np.zeros(len(texts), dtype=int)
    labels[np.random.default_rng(0).permutation(len(texts))[: len(texts) // 2]] = 1
    folds = chunk_folds(labels, 5, seed=0)
    n_pos, n_neg = int(labels[folds[0][1]].sum()), int((1 - labels[folds[0][1]]).sum())
    tolerance = 3 * null_auc_sd(n_pos, n_neg) / math.sqrt(len(folds))
    assert 0.10 < tolerance < 0.12
    result = evaluate_blind(texts, labels, folds, max_chars=MAX_CHARS)
    aucs = {k: v["summary"]["auc_mean"] for k, v in result["kinds"].items()}
    assert all(abs(auc - 0.5) <= tolerance for auc in aucs.values()), (aucs, tolerance)
    assert shift_warning(result["blind_auc"]) is None, aucs


def test_blind_scores_are_member_oriented():
    rng = random.Random(0)
    vocab_m, vocab_n, common = ["lantern", "carriage", "thee"], ["radio", "airplane", "movie"], ["the", "a", "of"]

    def doc(words):
        return " ".join(rng.choice(words + common * 2) for _ in range(300))

    train = [doc(vocab_m) for _ in range(10)] + [doc(vocab_n) for _ in range(10)]
    labels = [1] * 10 + [0] * 10
    test = [doc(vocab_m), doc(vocab_n)]
    for kind in ("tfidf", "nb"):
        scores = blind_scores(train, labels, test, kind=kind)
        assert scores.shape == (2,) and scores[0] > scores[1], kind
    dated_train = [f"Written in {1850 + i}." for i in range(10)] + [f"Written in {1950 + i}." for i in range(10)]
    scores = blind_scores(dated_train, labels, ["Printed in 1862.", "Printed in 1961."], kind="dates")
    assert scores[0] > scores[1]
    with pytest.raises(DocauditError, match="unknown blind baseline kind"):
        blind_scores(train, labels, test, kind="bert")
    with pytest.raises(DocauditError, match="one class"):
        blind_scores(train, [1] * 20, test)


def test_vocabulary_is_fit_on_training_documents_only():
    from scipy import sparse

    X = sparse.csr_matrix(np.array([[1, 0, 3, 0], [2, 0, 0, 0], [1, 5, 1, 0]]))
    sel = DocFreqSelector(min_df=2, max_features=1).fit(X)
    assert list(sel.columns_) == [0]  # columns 0 and 2 reach min_df; 0 has the larger total count
    assert sel.transform(np.array([[7, 7, 7, 7]])).toarray().tolist() == [[7]]


def test_year_features():
    assert years_mentioned("In 1850, and (1923). 1,850,000 men; 18500; 3.1850; 2030; 1499; 1600-1700.").tolist() == [
        1850,
        1923,
        1600,
        1700,
    ]
    feats = YearFeatures().transform(["In 1850 and 1923.", "no years"])
    assert feats.shape == (2, 53 + 5)
    assert feats[0, -5:].tolist() == pytest.approx([1923.0, 1886.5, math.log1p(2), 0.5, 1.0])
    assert not feats[1].any()


def test_shift_warning_thresholds():
    assert shift_warning(0.59) is None
    assert shift_warning(None) is None
    assert "0.600" in shift_warning(0.60)
    message = shift_warning(0.55, best_membership_auc=0.58)
    assert message is not None and "not evidence" in message and "0.580" in message
    assert shift_warning(0.55, best_membership_auc=0.70) is None


def test_shift_warning_says_above_or_within_as_it_is():
    """A blind AUC far above the best membership AUC is called "above", never "within"; one a little below it is
    "within"; the report page lists the same sentence."""
    from docaudit.report.contamination import report_warnings

    above = shift_warning(0.95, best_membership_auc=0.70)
    assert "0.250 above the best membership AUC 0.700" in above and "within" not in above
    within = shift_warning(0.55, best_membership_auc=0.58)
    assert "0.030 below, so within 0.05 of, the best membership AUC 0.580" in within and "above" not in within
    equal = shift_warning(0.55, best_membership_auc=0.55)
    assert "equal to the best membership AUC 0.550" in equal and "within" not in equal
    assert report_warnings({"blind_warning": above}) == [above]
