"""Dataset-level membership test, after "LLM Dataset Inference" (Maini et al. 2024).

Single documents are hard to call; a set of suspect documents can be tested together against a set of documents
known not to be in the training data, through several per-document detector scores at once:

1. split the suspect set and the known non-member set each at random into halves A and B;
2. on A, standardize the features and fit a logistic regression that separates suspect (1) from non-member (0);
3. on B, compute the combined (linear) score of both sets and run a one-sided Welch t-test that the suspect mean
   is larger;
4. repeat over ``n_splits`` random splits and combine the p-values as twice their median.

Why twice the median: the split p-values are dependent (they share documents), so Fisher's method is not valid.
For any dependence, ``n/r`` times the r-th smallest of n p-values is a valid p-value (Rüschendorf 1982; Meng
1994; Vovk & Wang 2020); with the median this is at most 2x the median. It is conservative by up to a factor 2
under the null but removes the luck of a single split, and unlike Bonferroni's ``n * min p`` it does not get
weaker as splits are added. ``n_splits=1`` gives the plain single-split p-value. The per-split p-values and the
Bonferroni value are kept in the result.

Validity of each split's p-value: the combining weights are fit on A only and B is untouched by the fit, so under
the null hypothesis (suspect and non-member documents are exchangeable as seen through these scores) the
combined scores of B's two groups have the same distribution; the Welch t-test then gives an approximately
uniform p-value (exact only for normal scores; with a few documents per half it is an approximation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from docaudit.config import DatasetTestConfig
from docaudit.errors import DocauditError

MIN_DOCS = 4


@dataclass(frozen=True)
class DatasetTestResult:
    """Outcome of ``dataset_test``.

    - ``p_value``: combined p-value (twice the median of the split p-values, capped at 1; see the module notes);
    - ``statistic``: median Welch t statistic over the splits (suspect minus non-member, on half B);
    - ``effect``: median over splits of the difference of mean combined scores on half B (suspect minus
      non-member, in units of the logistic model's log-odds);
    - ``effect_size``: the same difference divided by the pooled standard deviation (Cohen's d), median over
      splits;
    - ``split_p_values``: the p-value of every split; ``bonferroni_p``: ``min(1, n_splits * min(split_p_values))``;
    - ``meaning``: what the p-value does and does not mean, in words;
    - ``duplicates_dropped``: documents found in both sets and left out (``data.separate_sets``), when scored from
      files.
    """

    p_value: float
    statistic: float
    n_suspect: int
    n_nonmember: int
    effect: float
    effect_size: float
    n_splits: int
    split_p_values: tuple[float, ...]
    bonferroni_p: float
    n_features: int
    meaning: str = field(repr=False)
    duplicates_dropped: dict | None = None


def _check(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DocauditError(f"{name} scores must be a [documents, features] matrix, got shape {x.shape}")
    if x.shape[0] < MIN_DOCS:
        raise DocauditError(
            f"the dataset test needs at least {MIN_DOCS} {name} documents (two per half), got {x.shape[0]}"
        )
    if not np.isfinite(x).all():
        raise DocauditError(f"{name} scores contain NaN or infinite values")
    return x


def _halves(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    return order[: n // 2], order[n // 2 :]


def _meaning(p: float, n_s: int, n_n: int, k: int) -> str:
    return (
        f"p = {p:.3g}: if the {n_s} suspect documents came from the same distribution as the {n_n} known "
        f"non-members, as seen through these {k} detector score(s), a difference in the combined score at least "
        f"this large (suspect higher) would arise with probability at most {p:.3g}. A small p-value says the "
        "suspect documents look more member-like than the non-members; it is not proof that they were trained on: "
        "if the two sets differ for other reasons (era, genre, formatting, source, length) the scores can differ "
        "without any training. Read it beside the model-free (blind) baseline on the same documents, or use "
        "non-members drawn from the same distribution as the suspects. A large p-value is not proof of absence "
        "either: the detectors may be too weak for this model and this many documents."
    )


def dataset_test(
    suspect: np.ndarray,
    nonmember: np.ndarray,
    seed: int = 0,
    n_splits: int = DatasetTestConfig.splits,
    C: float = 1.0,
) -> DatasetTestResult:
    """Test whether the ``suspect`` documents score as more member-like than the known ``nonmember`` documents.

    ``suspect`` [n_s, k] and ``nonmember`` [n_n, k]: per-document detector scores, each column oriented so that
    higher = more member-like (a 1-d array is one feature). ``C`` is the inverse L2 regularisation strength of the
    logistic regression that combines the features. See the module notes for the procedure and the combination
    of the ``n_splits`` split p-values. Deterministic given ``seed``.
    """
    from scipy.stats import ttest_ind
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    s, n = _check("suspect", suspect), _check("non-member", nonmember)
    if s.shape[1] != n.shape[1]:
        raise DocauditError(
            f"suspect and non-member scores have different numbers of features ({s.shape[1]} and {n.shape[1]})"
        )
    if n_splits < 1:
        raise DocauditError(f"n_splits must be at least 1, got {n_splits}")
    rng = np.random.default_rng(seed)
    ps, ts, effects, ds = [], [], [], []
    for _ in range(n_splits):
        sa, sb = _halves(len(s), rng)
        na, nb = _halves(len(n), rng)
        x_fit = np.concatenate([s[sa], n[na]])
        y_fit = np.r_[np.ones(len(sa)), np.zeros(len(na))]
        scaler = StandardScaler().fit(x_fit)
        clf = LogisticRegression(C=C, max_iter=1000).fit(scaler.transform(x_fit), y_fit)
        zs = clf.decision_function(scaler.transform(s[sb]))
        zn = clf.decision_function(scaler.transform(n[nb]))
        diff = float(zs.mean() - zn.mean())
        if np.ptp(np.r_[zs, zn]) == 0.0:  # no variation at all (e.g. constant features): no evidence
            t, p = 0.0, 1.0
        else:
            res = ttest_ind(zs, zn, equal_var=False, alternative="greater")
            t, p = float(res.statistic), float(res.pvalue)
            if not np.isfinite(p):  # zero variance within both groups but a difference between them
                t, p = (np.inf, 0.0) if diff > 0 else (-np.inf, 1.0)
        pooled = np.sqrt((zs.var(ddof=1) + zn.var(ddof=1)) / 2.0)
        ps.append(p)
        ts.append(t)
        effects.append(diff)
        ds.append(diff / pooled if pooled > 0 else float(np.sign(diff) * np.inf) if diff else 0.0)
    p_value = float(min(1.0, 2.0 * np.median(ps))) if n_splits > 1 else float(ps[0])
    return DatasetTestResult(
        p_value=p_value,
        statistic=float(np.median(ts)),
        n_suspect=len(s),
        n_nonmember=len(n),
        effect=float(np.median(effects)),
        effect_size=float(np.median(ds)),
        n_splits=n_splits,
        split_p_values=tuple(float(p) for p in ps),
        bonferroni_p=float(min(1.0, n_splits * min(ps))),
        n_features=s.shape[1],
        meaning=_meaning(p_value, len(s), len(n), s.shape[1]),
    )


def dataset_test_documents(
    suspect_paths,
    nonmember_paths,
    model=None,
    methods=DatasetTestConfig.methods,
    query=None,
    seed: int = 0,
    n_splits: int = DatasetTestConfig.splits,
    raw: bool = False,
    progress: bool = False,
    skips=None,
    drop_duplicates: bool = False,
    normalize_chars: bool = False,
) -> tuple[DatasetTestResult, list[dict]]:
    """Score both document sets with the detectors ``methods`` on the target model (one query pass each, cached)
    and run :func:`dataset_test` on the score matrices. A text in both sets is an error, or with
    ``drop_duplicates`` left out of both. Documents that cannot be used are left out and recorded in ``skips``
    (a ``data.Skips``). Returns the result and the per-document scores."""
    from dataclasses import replace

    from docaudit.audit.scoring import score_documents
    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.corpus.documents import load_documents, separate_sets
    from docaudit.query.models import load_model

    suspect_docs, known_docs, duplicates = separate_sets(
        load_documents(suspect_paths, raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars),
        load_documents(nonmember_paths, raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars),
        drop_duplicates,
        ("suspects", "non-members"),
    )
    lm = load_model(model or ModelConfig())
    kwargs = {
        "methods": list(methods),
        "query": query or QueryConfig(),
        "raw": raw,
        "progress": progress,
        "skips": skips,
    }
    suspect = score_documents(suspect_docs, lm, **kwargs)
    known = score_documents(known_docs, lm, **kwargs)
    result = dataset_test(_score_matrix(suspect, methods), _score_matrix(known, methods), seed=seed, n_splits=n_splits)
    result = replace(result, duplicates_dropped=duplicates)
    return result, [{"set": "suspect", **r} for r in suspect] + [{"set": "nonmember", **r} for r in known]


def _score_matrix(rows: list[dict], methods) -> np.ndarray:
    return np.array([[row[m] for m in methods] for row in rows], dtype=float)
