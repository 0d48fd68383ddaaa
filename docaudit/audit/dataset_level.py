"""Dataset-level membership test, after "LLM Dataset Inference" (Maini et al. 2024).

Single documents are hard to call; a set of suspect documents can be tested together against a set of documents
known not to be in the training data, through several per-document detector scores at once:

1. split the suspect set and the known non-member set each at random into halves A and B;
2. on A, standardize the features and fit a logistic regression that separates suspect (1) from non-member (0)
   with every weight non-negative (a feature whose weight comes out negative is dropped and the rest refit; with
   every weight dropped, the first feature alone is used);
3. on B, compute the combined (linear) score of both sets and run the one-sided rank test that the suspects
   score higher, with its exact permutation p-value (:mod:`docaudit.inference.permutation`);
4. repeat over ``n_splits`` random splits and combine the p-values as twice their median.

One-sided in the member direction: every feature is oriented higher = more member-like (docaudit's detector
scores are), and with non-negative weights the combined score is too, so only suspects that look *more*
member-like than the non-members can give a small p-value; suspects that are the less member-like set give a large
one. Maini et al.'s code (pratyushmaini/llm_dataset_inference, ``linear_di.py``) fits an unconstrained linear model
and tests one-sided in whatever direction it learned, which tests "the sets differ", not "the suspects look
trained on".

Why twice the median: the split p-values are dependent (they share documents), so Fisher's method is not valid.
For any dependence, ``n/r`` times the r-th smallest of n p-values is a valid p-value (Rüschendorf 1982; Meng
1994; Vovk & Wang 2020); with the median this is at most 2x the median. It is conservative by up to a factor 2
under the null but removes the luck of a single split, and unlike Bonferroni's ``n * min p`` it does not get
weaker as splits are added. ``n_splits=1`` gives the plain single-split p-value. The per-split p-values and the
Bonferroni value are kept in the result.

Validity of each split's p-value: the combining weights are fit on A only and B is untouched by the fit, so under
the null hypothesis (suspect and non-member documents are exchangeable as seen through these scores) B's combined
scores are exchangeable between the two groups, and the permutation p-value of the rank test is valid at every
level on any scores, with any number of documents and ties (Maini et al.'s Welch t-test is exact only for normal
scores, and with two documents per half far from it).

Maini et al.'s false-positive check (the same test on two random halves of the known non-members) is not run:
two random halves of one set are exchangeable by construction, so its p-value is uniform on any data, whatever
the suspects are; it cannot see the one failure that matters (suspects and non-members that differ for reasons
other than training), and when it fell below the level (at that level's rate, by chance) it made a verdict
inconclusive for nothing. The level of each split's test is guaranteed by the permutation argument above; the
difference between the sets as text is what the blind p-value checks.

Beside the p-value:

- ``p_by_size``: the p-value with only ``k`` randomly chosen suspect documents, for growing ``k`` (all
  non-members kept): how many suspects the test needs.
- ``p_value_blind``: the same split test with a model-free classifier of the texts (``methods.blind``, kind
  ``DatasetTestConfig.blind_kind``) fit on A in place of the detector scores. A small blind p-value says the sets
  differ as text (era, topic, source), which makes the model's p-value unreadable as membership.

The verdict (``docaudit.inference.verdicts``): "evidence of membership" only when the model's p-value is below
``alpha`` while the blind p-value is not; "inconclusive", with the reason, when the blind test already separates
the sets or no blind test could be run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from docaudit.config import DatasetTestConfig
from docaudit.errors import DocauditError
from docaudit.inference.permutation import rank_sum_test
from docaudit.inference.verdicts import DEFAULT_ALPHA, decide
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext
from docaudit.seeds import stream

MIN_DOCS = 4

SIZES = (5, 10, 20, 50, 100, 150, 200, 300, 400, 500, 600, 700, 800, 900, 1000)
"""Numbers of suspect documents in the p-value-by-size table (Maini et al.'s ``p_sample_list`` from 5 on); the
full set is always added."""


@dataclass(frozen=True)
class DatasetTestResult:
    """Outcome of ``dataset_test``.

    - ``p_value``: combined p-value (twice the median of the split p-values, capped at 1; see the module notes);
    - ``statistic``: median over the splits of the rank test's AUC on half B (the share of (suspect, non-member)
      pairs where the suspect's combined score is higher, ties one half; 0.5: no difference);
    - ``effect``: median over splits of the difference of mean combined scores on half B (suspect minus
      non-member, in units of the logistic model's log-odds);
    - ``effect_size``: the same difference divided by the pooled standard deviation (Cohen's d), median over
      splits;
    - ``split_p_values``: the p-value of every split; ``bonferroni_p``: ``min(1, n_splits * min(split_p_values))``;
    - ``meaning``: what the p-value does and does not mean, in words;
    - ``duplicates_dropped``: documents found in both sets and left out (``data.separate_sets``), when scored from
      files;
    - ``p_by_size``, ``p_value_blind`` (``blind_reason`` when it could not run), ``blind_kind``: see the module
      notes; ``test``: the per-split test in words;
    - ``rely_on``: one sentence saying which p-value the user may rely on; ``verdict``: the verdict's fields
      (``docaudit.inference.verdicts.Verdict.as_dict``).
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
    p_by_size: tuple[dict, ...] = ()
    p_value_blind: float | None = None
    blind_reason: str | None = None
    blind_kind: str | None = None
    rely_on: str = ""
    verdict: dict | None = None
    test: str = ""


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


TEST = (
    "one-sided rank test (Wilcoxon-Mann-Whitney) of suspects scoring higher on half B, with its permutation "
    "p-value given the observed scores"
)


def _one_split(zs: np.ndarray, zn: np.ndarray) -> tuple[float, float, float, float]:
    """The one-sided rank test that the suspects' half-B scores ``zs`` exceed the non-members' ``zn``, with its
    permutation p-value: ``(p, AUC, difference of means, Cohen's d)``."""
    test = rank_sum_test(zs, zn)
    diff = float(zs.mean() - zn.mean())
    pooled = np.sqrt((zs.var(ddof=1) + zn.var(ddof=1)) / 2.0)
    d = diff / pooled if pooled > 0 else float(np.sign(diff) * np.inf) if diff else 0.0
    return test.p_value, test.auc, diff, d


def _splits(n_s: int, n_n: int, n_splits: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """``n_splits`` random ``(suspect A, suspect B, non-member A, non-member B)`` index halves."""
    rng = stream(seed, "dataset_splits")
    return [(*_halves(n_s, rng), *_halves(n_n, rng)) for _ in range(n_splits)]


def _combine(ps: list[float]) -> float:
    return float(min(1.0, 2.0 * np.median(ps))) if len(ps) > 1 else float(ps[0])


def _feature_split(s: np.ndarray, n: np.ndarray, split) -> tuple[float, float, float, float]:
    """One split of the detector-score test: non-negative logistic weights fit on half A, tested on half B."""
    from sklearn.preprocessing import StandardScaler

    from docaudit.methods.beyond_blind import nonnegative_logistic

    sa, sb, na, nb = split
    x_fit = np.concatenate([s[sa], n[na]])
    y_fit = np.r_[np.ones(len(sa)), np.zeros(len(na))]
    scaler = StandardScaler().fit(x_fit)
    weights, bias = nonnegative_logistic(scaler.transform(x_fit), y_fit)
    return _one_split(scaler.transform(s[sb]) @ weights + bias, scaler.transform(n[nb]) @ weights + bias)


def _feature_test(s: np.ndarray, n: np.ndarray, seed: int, n_splits: int) -> list[tuple]:
    return [_feature_split(s, n, split) for split in _splits(len(s), len(n), n_splits, seed)]


def blind_p_value(blind, n_s: int, n_n: int, kind: str, seed: int, n_splits: int) -> float:
    """The split test with a model-free classifier of kind ``kind`` fit on half A of the texts in place of the
    detector scores. ``blind``: a :class:`docaudit.methods.blind.BlindFeatures` of the suspect texts followed by
    the non-member texts."""
    from sklearn.base import clone

    from docaudit.methods.blind import BlindClassifier

    labels = np.r_[np.ones(n_s, int), np.zeros(n_n, int)]
    estimator = BlindClassifier(kind, blind.max_chars, random_state=seed)
    ps = []
    for sa, sb, na, nb in _splits(n_s, n_n, n_splits, seed):
        train, test = np.r_[sa, n_s + na], np.r_[sb, n_s + nb]
        model = clone(estimator).fit(blind[train], labels[train])
        z = np.asarray(model.decision_function(blind[test]), dtype=np.float64)
        ps.append(_one_split(z[: len(sb)], z[len(sb) :])[0])
    return _combine(ps)


def rely_on(p_value: float, p_blind: float | None, alpha: float) -> str:
    """One sentence: which of the two p-values the user may rely on."""
    if p_blind is None:
        return (
            "No blind baseline was run, so neither p-value can be relied on as membership evidence: a difference "
            "between the sets as text would give the model's p-value alone no meaning."
        )
    if p_blind < alpha:
        return (
            f"Rely on neither as membership evidence: the model-free test already tells the sets apart "
            f"(p_blind = {p_blind:.3g} < {alpha}), so the model's p-value (p = {p_value:.3g}) may only reflect how the "
            "sets differ as text."
        )
    return (
        f"Rely on the model's p-value (p = {p_value:.3g}): the model-free test does not tell the sets apart "
        f"(p_blind = {p_blind:.3g} >= {alpha}), though a difference it cannot see could still move the model's."
    )


def dataset_test(
    suspect: np.ndarray,
    nonmember: np.ndarray,
    seed: int = 0,
    n_splits: int = DatasetTestConfig.splits,
    blind=None,
    blind_kind: str = DatasetTestConfig.blind_kind,
    alpha: float = DEFAULT_ALPHA,
) -> DatasetTestResult:
    """Test whether the ``suspect`` documents score as more member-like than the known ``nonmember`` documents.

    ``suspect`` [n_s, k] and ``nonmember`` [n_n, k]: per-document detector scores, each column oriented so that
    higher = more member-like (a 1-d array is one feature). ``C`` is the inverse L2 regularisation strength of the
    logistic regression that combines the features. ``blind``: the texts as a
    :class:`docaudit.methods.blind.BlindFeatures` (suspects first) for the blind p-value, or None. See the module
    notes for the procedure, the p-value by size and the verdict at level ``alpha``.
    Deterministic given ``seed``.
    """
    s, n = _check("suspect", suspect), _check("non-member", nonmember)
    if s.shape[1] != n.shape[1]:
        raise DocauditError(
            f"suspect and non-member scores have different numbers of features ({s.shape[1]} and {n.shape[1]})"
        )
    if n_splits < 1:
        raise DocauditError(f"n_splits must be at least 1, got {n_splits}")
    if blind is not None and len(blind) != len(s) + len(n):
        raise DocauditError(f"{len(blind)} texts for {len(s)} suspect and {len(n)} non-member score rows")
    ps, aucs, effects, ds = (list(v) for v in zip(*_feature_test(s, n, seed, n_splits)))
    p_value = _combine(ps)

    rng = stream(seed, "dataset_sizes")
    sizes = [k for k in SIZES if MIN_DOCS <= k < len(s)] + [len(s)]
    by_size = []
    for k in sizes:
        chosen = rng.choice(len(s), size=k, replace=False)
        p_k = p_value if k == len(s) else _combine([r[0] for r in _feature_test(s[chosen], n, seed, n_splits)])
        by_size.append({"n_suspect": k, "p_value": p_k})

    p_blind, blind_reason = None, "no texts were given for the model-free (blind) test"
    if blind is not None:
        p_blind, blind_reason = blind_p_value(blind, len(s), len(n), blind_kind, seed, n_splits), None
    reason = None
    if p_blind is None:
        reason = blind_reason
    elif p_blind < alpha:
        reason = (
            f"the model-free (blind) test already tells the sets apart (p_blind = {p_blind:.3g} < {alpha}): they "
            "differ as text, so the model's p-value cannot be read as membership"
        )
    return DatasetTestResult(
        p_value=p_value,
        statistic=float(np.median(aucs)),
        n_suspect=len(s),
        n_nonmember=len(n),
        effect=float(np.median(effects)),
        effect_size=float(np.median(ds)),
        n_splits=n_splits,
        split_p_values=tuple(float(p) for p in ps),
        bonferroni_p=float(min(1.0, n_splits * min(ps))),
        n_features=s.shape[1],
        meaning=_meaning(p_value, len(s), len(n), s.shape[1]),
        p_by_size=tuple(by_size),
        p_value_blind=p_blind,
        blind_reason=blind_reason,
        blind_kind=blind_kind if blind is not None else None,
        rely_on=rely_on(p_value, p_blind, alpha),
        verdict=decide(p_value, None, alpha, inconclusive_reason=reason).as_dict(),
        test=TEST,
    )


def dataset_test_documents(
    suspect_paths,
    nonmember_paths,
    model=None,
    query=None,
    config: DatasetTestConfig = DatasetTestConfig(),
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
    alpha: float = DEFAULT_ALPHA,
) -> tuple[DatasetTestResult, list[dict]]:
    """Score both document sets with the detectors ``config.methods`` on the target model (one query pass each,
    cached) and run :func:`dataset_test` on the score matrices with ``config.splits`` splits, seeded by
    ``run.seed``. A text in both sets is an error, or with ``reading.drop_duplicates`` left out of both. Documents
    that cannot be used are left out and recorded in ``reading.skips``. The documents' texts give the blind p-value
    (a model-free classifier of kind ``config.blind_kind``); ``alpha``: the level of the verdict. Returns the result
    and the per-document scores."""
    from dataclasses import replace

    from docaudit.audit.scoring import score_documents
    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.corpus.documents import load_documents, separate_sets
    from docaudit.provenance import Rows
    from docaudit.query.models import load_model

    read = {"raw": reading.raw, "progress": run.progress, "skips": reading.skips}
    suspect_docs, known_docs, duplicates = separate_sets(
        load_documents(suspect_paths, **read, normalize_chars=reading.normalize_chars),
        load_documents(nonmember_paths, **read, normalize_chars=reading.normalize_chars),
        reading.drop_duplicates,
        ("suspects", "non-members"),
    )
    methods = config.methods
    scoring = (ModelSpec(load_model(model or ModelConfig())), query or QueryConfig(), DetectorSpec(list(methods)))
    suspect = score_documents(suspect_docs, *scoring, reading, run)
    known = score_documents(known_docs, *scoring, reading, run)
    from docaudit.methods.blind import BlindFeatures

    text_of = {d.path: d.text for d in suspect_docs + known_docs}
    result = dataset_test(
        _score_matrix(suspect, methods),
        _score_matrix(known, methods),
        seed=run.seed,
        n_splits=config.splits,
        blind=BlindFeatures([text_of[row["file"]] for row in suspect + known]),
        blind_kind=config.blind_kind,
        alpha=alpha,
    )
    result = replace(result, duplicates_dropped=duplicates)
    rows = [{"set": "suspect", **r} for r in suspect] + [{"set": "nonmember", **r} for r in known]
    inputs = [{**r, "role": "suspect"} for r in suspect.inputs] + [{**r, "role": "nonmember"} for r in known.inputs]
    return result, Rows(rows, inputs, suspect.model, run.seed)


def _score_matrix(rows: list[dict], methods) -> np.ndarray:
    return np.array([[row[m] for m in methods] for row in rows], dtype=float)
