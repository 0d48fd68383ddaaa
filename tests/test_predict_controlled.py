"""``predict`` end to end where the truth is known: a tiny target trained on a random half of real book excerpts,
a classifier trained on some of its members and 40 of its non-members, and held-out documents judged. Members
the target trained on reach "evidence of membership"; the p-values ``predict`` prints are recomputed here by hand
from the classifier folder (``conformal.skops``, ``folds.skops``) and the card; and the p-values of never-trained
documents hold their level in a null simulation sized to see a doubled rate (the few held-out non-members, whose
smallest attainable p-value is 1/41, could not show that)."""

import json

import numpy as np
import pytest
import skops.io as sio
from click.testing import CliRunner
from labtarget import TINY, excerpts, single_thread
from sklearn.base import clone

from docaudit.cli import main
from docaudit.config import ModelConfig, QueryConfig
from docaudit.corpus.documents import load_documents
from docaudit.inference.verdicts import EVIDENCE
from docaudit.lab.experiment import split_members
from docaudit.lab.target import train_target
from docaudit.methods.blind import BlindFeatures, fold_scores
from docaudit.methods.meta.classifier import as_documents
from docaudit.methods.meta.persistence import trusted_types
from docaudit.query.models import load_model
from docaudit.query.querier import open_querier, query_documents

N_DOCS = 90


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Train the target on 26 of 90 excerpts (a random split), a classifier on 20 of those members and 40 of the
    never-trained ones; judge the 6 other members and 3 other non-members."""
    texts = excerpts(N_DOCS, n_words=120)
    split = split_members(list(texts), seed=3)
    members = [b for b in sorted(texts) if split[b]][:26]
    nonmembers = [b for b in sorted(texts) if not split[b]][:43]
    root = tmp_path_factory.mktemp("predict-controlled")
    groups = {"mem": members[:20], "non": nonmembers[:40], "held_mem": members[20:], "held_non": nonmembers[40:]}
    for name, books in groups.items():
        (root / name).mkdir()
        for book in books:
            (root / name / f"{book}.txt").write_text(texts[book])
    with single_thread():
        pool = [texts[b] for b in members + nonmembers]
        model = train_target([texts[b] for b in members], pool, root / "target", TINY)
        out = root / "clf"
        fast = ["--context", "63", "--trees", "60", "--bins", "20", "--norm", "none", "--features", "agg"]
        run = CliRunner().invoke(
            main,
            ["train", "--members", str(root / "mem"), "--nonmembers", str(root / "non"), "--model", str(model)]
            + fast
            + ["--folds", "4", "--out", str(out)],
        )
        assert run.exit_code == 0, run.output
        paths = [str(root / "held_mem"), str(root / "held_non")]
        run = CliRunner().invoke(main, ["predict", "--classifier", str(out), "--format", "json", *paths])
        assert run.exit_code == 0, run.output
    rows = json.loads(run.stdout)["rows"]
    return model, out, rows


@pytest.mark.slow
def test_trained_members_reach_evidence(judged):
    _, out, rows = judged
    card = json.loads((out / "card.json").read_text())
    assert card["pooled_bootstrap_95"]["auc"]["ci_low"] > 0.5, card["pooled_bootstrap_95"]
    mem = [r for r in rows if "/held_mem/" in r["file"]]
    non = [r for r in rows if "/held_non/" in r["file"]]
    assert len(mem) == 6 and len(non) == 3
    # each document is ranked among the known non-members of its length class, counted here from the saved tokens
    saved = sio.loads((out / "conformal.skops").read_bytes(), trusted=trusted_types())
    known = [int(n).bit_length() - 1 for n, y in zip(saved["tokens"], saved["labels"]) if y == 0]
    for r in rows:
        assert r["n_compared"] == known.count(r["n_tokens"].bit_length() - 1)
        assert r["smallest_p"] == 1 / (r["n_compared"] + 1)
    assert sum(r["verdict"] == EVIDENCE for r in mem) >= 4, [(r["verdict"], r["p_value"], r["reason"]) for r in mem]


# The null check below: TRIALS draws of 41 of the never-trained documents; at each level a = j/41 (j = 1, 2: the
# smallest attainable p-value and the largest level at most 0.05) it fails when more than a + 2.33 binomial SEs of
# the trials give p <= a, which a doubled rate exceeds with probability >= 0.9
# (test_the_null_check_is_sized_to_see_a_doubled_rate).
TRIALS = 700
LEVELS = (1 / 41, 2 / 41)


def null_bound(rate: float) -> int:
    """The most trials with p <= ``rate`` the null check accepts (``rate`` + 2.33 binomial SEs)."""
    return int(np.floor(TRIALS * rate + 2.33 * np.sqrt(TRIALS * rate * (1 - rate))))


def test_the_null_check_is_sized_to_see_a_doubled_rate():
    from scipy.stats import binom

    for rate in LEVELS:
        assert binom.sf(null_bound(rate), TRIALS, 2 * rate) >= 0.9


@pytest.mark.slow
def test_predict_p_values_hold_their_level_for_never_trained_documents(judged):
    """Each trial draws 40 of the never-trained documents as the classifier's known non-members and one other as
    the judged document, in a random order, and takes its p-value from ``conformal_p_values`` (what ``predict``
    prints) with the saved members and forest settings. Given the pool, the judged document is a uniform draw from
    the 41, so P(p <= j/41) <= j/41 exactly when the p-value is valid, trial by trial and independently."""
    from docaudit.methods.meta.conformal_data import conformal_p_values, conformal_predictor

    model, out, _ = judged
    card = json.loads((out / "card.json").read_text())
    saved = sio.loads((out / "conformal.skops").read_bytes(), trusted=trusted_types())
    files = sorted(str(f) for d in ("non", "held_non") for f in (out.parent / d).glob("*.txt"))
    docs = load_documents(files, raw=card["raw"], normalize_chars=card["normalize_chars"])
    query, seed = QueryConfig.recorded(card["query"])
    with single_thread():
        stats = query_documents(open_querier(load_model(ModelConfig(model=str(model))), query, seed=seed), docs)
    representation, _ = conformal_predictor(saved, 0, None)
    pool = representation.transform(as_documents(stats))
    members = saved["features"][saved["labels"] == 1]
    rng = np.random.default_rng(11)
    p = []
    for t in range(TRIALS):
        order = rng.permutation(len(pool))[:41]
        data = {
            "pipeline": saved["pipeline"],
            "features": np.r_[members, pool[order[:40]]],
            "labels": np.r_[np.ones(len(members)), np.zeros(40)].astype(int),
        }
        p += conformal_p_values(data, [stats[order[40]]], [f"trial {t}"], seed=t, cap=None)[0]
    for rate in LEVELS:
        assert sum(x <= rate + 1e-12 for x in p) <= null_bound(rate), (rate, np.mean(np.array(p) <= rate + 1e-12))


def slow_oob(forest, X: np.ndarray) -> np.ndarray:
    """Out-of-bag member probability of each row, tree by tree: each tree's own bootstrap sample, drawn as
    scikit-learn draws it from the tree's seed, and the mean of the probabilities of the trees that left it out."""
    from sklearn.ensemble._forest import _generate_sample_indices

    total, count = np.zeros(len(X)), np.zeros(len(X))
    for tree in forest.estimators_:
        inbag = np.zeros(len(X), dtype=bool)
        inbag[_generate_sample_indices(tree.random_state, len(X), len(X), None)] = True
        total[~inbag] += tree.predict_proba(X[~inbag])[:, 1]
        count[~inbag] += 1
    return total / count


@pytest.mark.slow
def test_predict_p_values_recomputed_from_the_classifier_folder(judged):
    from docaudit.inference.conformal import insert_position
    from docaudit.methods.meta.folds import FOLD_NODES

    model, out, rows = judged
    card = json.loads((out / "card.json").read_text())
    saved = sio.loads((out / "conformal.skops").read_bytes(), trusted=trusted_types())
    blinds = sio.loads((out / "blind_folds.skops").read_bytes(), trusted=trusted_types(FOLD_NODES))
    docs = load_documents([r["file"] for r in rows], raw=card["raw"], normalize_chars=card["normalize_chars"])
    lm = load_model(ModelConfig(model=str(model)))
    query, seed = QueryConfig.recorded(card["query"])
    stats = query_documents(open_querier(lm, query, seed=seed), docs)
    X, y = saved["features"], saved["labels"]
    pipe = saved["pipeline"]
    rows_new = pipe[:-1].transform(as_documents(stats))
    members, nonmembers = X[y == 1], X[y == 0]
    kind = card["conformal"]["blind_kind"]
    held = card["conformal"]["blind_nonmember_scores"]
    texts = BlindFeatures([d.text for d in docs], card["conformal"]["blind_max_chars"])
    blind = [fold_scores(m, texts, kind) for m in blinds]
    for i, (row, doc, x) in enumerate(zip(rows, docs, rows_new)):
        at = insert_position(len(nonmembers), card["meta"]["seed"], doc.sha256)
        train = np.r_[members, nonmembers[:at], x[None], nonmembers[at:]]
        labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers) + 1)].astype(int)
        forest = clone(pipe.steps[-1][1]).fit(train, labels)
        oob = slow_oob(forest, train)[len(members) :]
        mine, others = oob[at], np.r_[oob[:at], oob[at + 1 :]]
        # ranked among the known non-members of its length class only (no token budget: within a factor of two)
        others = others[[int(n).bit_length() == stats[i].n_tokens.bit_length() for n in saved["tokens"][y == 0]]]
        if len(others) == 0:
            assert row["p_value"] is None
        else:
            assert row["p_value"] == pytest.approx((1 + sum(s >= mine for s in others)) / (len(others) + 1))
        # the blind p-value: fold k's blind model against the non-members fold k held out, counted by hand
        count = sum(s >= blind[k][i] for k in range(len(held)) for s in held[k])
        assert row["p_value_blind"] == pytest.approx((1 + count) / (sum(map(len, held)) + 1))
    # the check sees a fold-order mismatch: fold k's models against another fold's held-out scores
    shifted = [
        (1 + sum(s >= blind[k][i] for k in range(len(held)) for s in held[(k + 1) % len(held)]))
        / (sum(map(len, held)) + 1)
        for i in range(len(rows))
    ]
    assert not np.allclose(shifted, [r["p_value_blind"] for r in rows])
