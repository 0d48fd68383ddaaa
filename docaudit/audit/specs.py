"""The typed specs of the audits, importable before any heavy library is: what an evaluation, a contamination
report and a map compute, and what a user grants a classifier card's model. The API's requests hold them, and the
command line builds them before its checks (no torch or scikit-learn loaded)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from docaudit.config import (
    BeyondBlindConfig,
    ContaminationConfig,
    DatasetTestConfig,
    DetectorConfig,
    LocalizeConfig,
    MetaConfig,
    QueryConfig,
    ScalingConfig,
)
from docaudit.inference.verdicts import DEFAULT_ALPHA
from docaudit.methods.document_level import LEVELS

BLIND_KINDS: tuple[str, ...] = next(f.metadata["choices"] for f in fields(DatasetTestConfig) if f.name == "blind_kind")
"""Every model-free baseline (``methods.blind``), as ``config`` lists them."""


@dataclass(frozen=True)
class EvaluationSpec:
    """What ``evaluate_methods`` computes besides the detectors: the meta-classifier (``meta``; None: not run),
    the detectors' document-level scaling, the ``levels`` reported, the model-free baselines ``blind_kinds`` (none
    when empty or None), the number of ``folds``, and ``beyond``: the membership method compared with the blind
    baseline (``meta_classifier``, a detector at ``doc_avg``, or ``detector:level``; ``auto``: the meta-classifier
    when it runs, else the first detector at ``doc_avg``; None: no comparison), compared as ``beyond_config``
    says."""

    meta: MetaConfig | None = MetaConfig()
    scaling: ScalingConfig = ScalingConfig()
    folds: int = 5
    levels: Sequence[str] = tuple(LEVELS)
    blind_kinds: Sequence[str] | None = BLIND_KINDS
    beyond: str | None = "auto"
    beyond_config: BeyondBlindConfig = BeyondBlindConfig()


@dataclass(frozen=True)
class ReportSpec:
    """What a contamination report computes: snippets, threshold and intervals (``contamination``), the
    comparison of the calibration books' mean snippet scores with the blind baseline (``beyond``) and the level of
    the per-book verdicts (``alpha``, ``audit.book_verdicts``), shared by ``n_methods`` reports of the same books
    by different methods (each then decides at ``alpha / n_methods``)."""

    contamination: ContaminationConfig = ContaminationConfig()
    beyond: BeyondBlindConfig = BeyondBlindConfig()
    alpha: float = DEFAULT_ALPHA
    n_methods: int = 1


@dataclass(frozen=True)
class MapSpec:
    """What a map is computed with: its settings, the detector's own settings, the windows every book is queried
    with (``max_tokens``: only the first that many tokens of each book are mapped, ``localize.leading_part``) and
    the significance level."""

    config: LocalizeConfig = LocalizeConfig()
    detector: DetectorConfig = DetectorConfig()
    query: QueryConfig = QueryConfig()
    alpha: float = DEFAULT_ALPHA


@dataclass(frozen=True)
class CardAccess:
    """What the user grants the model a classifier's card names, used when no model is given
    (``audit.card_model.card_model``): ``trust_remote_code`` (the user's own flag, never the card's),
    ``use_card_backend`` (accept a server or hub model the card names) and ``user_settings`` (the user's ModelConfig
    fields, replacing the card's)."""

    trust_remote_code: bool = False
    use_card_backend: bool = False
    user_settings: dict | None = None
