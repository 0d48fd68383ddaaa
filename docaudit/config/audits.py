"""The audits' settings: contamination report, sequence-level evaluation, dataset test, beyond-blind."""

from __future__ import annotations

from dataclasses import dataclass

from docaudit.config.base import (
    MAX_FOLDS,
    MAX_RESAMPLES,
    MAX_SNIPPETS,
    MAX_SPLITS,
    MAX_TOKENS,
    MAX_WORDS,
    check_count,
    setting,
)
from docaudit.inference.verdicts import DEFAULT_ALPHA


@dataclass(frozen=True)
class ContaminationConfig:
    """Per-book contamination rates (Min-K% Prob paper, sec. 5): ``snippets`` random snippets of ``snippet_words``
    words per book, scored by ``method`` in one window of up to ``max_context`` tokens; the threshold maximizes
    calibration accuracy, or meets ``target_fpr`` on the non-member snippets; Wilson intervals at ``confidence``, and
    book-level bootstrap intervals from ``book_bootstrap`` resamples of the calibration books and snippets; a book's
    p-value compares its rate with the calibration non-members' at its own snippet count, at least ``min_snippets``."""

    method: str = setting("minkpp", "The detector that scores the snippets.", "method", flag="--methods")
    snippets: int = setting(100, "Random snippets per book.", "method")
    snippet_words: int = setting(512, "Words per snippet.", "method")
    target_fpr: float | None = setting(
        None,
        "Choose the threshold for this FPR on non-member snippets (default: maximize snippet accuracy).",
        "method",
    )
    max_context: int = setting(
        2048,
        "Largest window: a snippet is scored in one window of min(model positions, this) tokens, over several "
        "windows when longer.",
        "query",
    )
    confidence: float = setting(0.95, "Level of the Wilson and book-level intervals of each rate.", "method")
    min_snippets: int = setting(
        10,
        "Fewest snippets a book's p-value may rest on: a book with fewer is inconclusive (its rate is compared with "
        "the calibration non-member books' at its own snippet count).",
        "method",
    )
    book_bootstrap: int = setting(
        1000,
        "Bootstrap resamples of calibration books and snippets behind the book-level interval.",
        "method",
        flag="--resamples",
        aliases=("--book-bootstrap",),
    )

    def __post_init__(self):
        check_count("--snippets", self.snippets, 1, MAX_SNIPPETS)
        check_count("--snippet-words", self.snippet_words, 1, MAX_WORDS)
        check_count("--max-context", self.max_context, 2, MAX_TOKENS)
        check_count("--resamples", self.book_bootstrap, 1, MAX_RESAMPLES)


@dataclass(frozen=True)
class SequenceConfig:
    """Sequence-level evaluation (docs/methods.md, "Sequence-level evaluation"): each text scored in one window of
    up to ``max_context`` tokens; AUC and TPR at each of ``fprs`` with ``n_boot``-resample stratified bootstrap
    intervals, overall and per WikiMIA length bucket (``buckets``, words); the Min-K% / Min-K%++ share swept over
    ``ks``. ReCaLL's prefix, when none is given, is ``recall_shots`` non-member texts, left out of the evaluation.
    The blind baseline (docs/methods.md, "Blind baseline") runs on ``blind_folds`` chunks of the texts (0: off)."""

    max_context: int = setting(
        2048, "Largest window: each text is scored in one window of min(model positions, this) tokens.", "query"
    )
    fprs: tuple[float, ...] = (0.10, 0.05, 0.01)
    buckets: tuple[int, ...] = (32, 64, 128, 256)
    ks: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    n_boot: int = setting(
        1000, "Bootstrap resamples behind each interval.", "method", flag="--resamples", aliases=("--n-boot",)
    )
    recall_shots: int = setting(5, "ReCaLL without --recall-prefix: non-member texts taken as the prefix.", "method")
    blind_folds: int = setting(
        5,
        "k of the k-fold chunks of the texts for the blind baseline (0: no baseline).",
        "method",
        flag="--folds",
        aliases=("--blind-folds",),
    )

    def __post_init__(self):
        check_count("--max-context", self.max_context, 2, MAX_TOKENS)
        check_count("--resamples", self.n_boot, 1, MAX_RESAMPLES)
        check_count("--recall-shots", self.recall_shots, 0, MAX_SNIPPETS)
        check_count("--folds", self.blind_folds, 0, MAX_FOLDS)


@dataclass(frozen=True)
class DatasetTestConfig:
    """The dataset-level test: the detector scores combined (``methods``), the random half splits whose
    p-values are combined (``splits``) and the model-free classifier of the blind p-value (``blind_kind``, chosen
    before seeing any data: choosing the best kind afterwards would make its p-value too small)."""

    methods: tuple[str, ...] = setting(("loss", "zlib", "mink", "minkpp"), "Detector scores to combine.", "method")
    splits: int = setting(10, "Random half splits whose p-values are combined.", "method")
    blind_kind: str = setting(
        "tfidf",
        "Model-free classifier of the texts whose p-value is reported beside the model's.",
        "method",
        choices=("tfidf", "nb", "dates"),
    )

    def __post_init__(self):
        check_count("--splits", self.splits, 1, MAX_SPLITS)


@dataclass(frozen=True)
class BeyondBlindConfig:
    """What the model adds over the blind baseline (docs/methods.md, "Beyond the blind baseline"). The combined
    classifier is fit, inside each training fold, on scores from ``inner_folds``-fold cross-validation; ``delta``
    gets a paired stratified bootstrap interval (``n_boot`` resamples, level ``confidence``) and DeLong's one-sided
    p-value; the verdict needs the interval above 0 and p below ``p_level``. ``report`` compares on the calibration
    books with ``folds`` folds (fewer when a class has fewer books)."""

    inner_folds: int = 3
    n_boot: int = 1000
    confidence: float = 0.95
    p_level: float = DEFAULT_ALPHA
    folds: int = 5

    def __post_init__(self):
        check_count("inner_folds", self.inner_folds, 2, MAX_FOLDS)
        check_count("n_boot", self.n_boot, 1, MAX_RESAMPLES)
        check_count("folds", self.folds, 2, MAX_FOLDS)
