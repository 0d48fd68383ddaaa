"""``train``, the Table-1 ``grid`` and ``predict``: the meta-classifier trained on k-fold chunks and saved, every
configuration compared, and a verdict per document from a saved classifier."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs, recorded, scaled, skipped_rows
from docaudit.audit.specs import CardAccess
from docaudit.config import ModelConfig, TrainConfig
from docaudit.inference.verdicts import DEFAULT_ALPHA
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext

if TYPE_CHECKING:
    import pandas as pd

    from docaudit.audit import meta


@dataclass(frozen=True)
class TrainRequest:
    """Train a meta-classifier on ``members`` and ``nonmembers`` (files, folders, datasets) as ``config`` says;
    with ``out``, save it there with its card and ROC curves (a new or empty folder, or an earlier classifier with
    ``overwrite``). ``model``: the target already loaded (None: loaded from ``config.model``)."""

    members: Sequence[object]
    nonmembers: Sequence[object]
    config: TrainConfig = field(default_factory=TrainConfig)
    out: Path | None = None
    overwrite: bool = False
    model: LoadedModel | None = None
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.members, self.nonmembers, self.config.model))


@dataclass
class TrainResult(Result):
    """``trained``: what ``audit.meta.train`` measured and fitted (its card, k-fold evaluation, estimator); ``out``:
    where it was saved (None: not saved); the frame: each training document's out-of-fold score."""

    schema: ClassVar[str] = "train"
    trained: meta.TrainResult
    out: Path | None
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        from docaudit.report.classifier import out_of_fold_predictions

        return out_of_fold_predictions(self.trained.documents, self.trained.evaluation)


def train(request: TrainRequest) -> TrainResult:
    """Evaluate the meta-classifier on k-fold chunks beside the blind baseline, fit it on all documents and, with
    ``request.out``, save it there."""
    from docaudit.audit import meta
    from docaudit.outputs import prepare_output
    from docaudit.report.classifier import save_model_dir

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        if r.out is not None:
            prepare_output(r.out, "classifier", r.overwrite, r.inputs())
        result = meta.train(r.members, r.nonmembers, r.config, r.model, run, reading.skips)
    if r.out is not None:
        extras = result.extras
        save_model_dir(
            Path(r.out),
            result.estimator,
            result.card,
            result.evaluation,
            r.overwrite,
            result.documents,
            extras.get("fold_models"),
            extras.get("conformal_data"),
        )
        result.out = Path(r.out)
    return TrainResult(result, result.out, envelope_of("train", result.card, r.run))


@dataclass(frozen=True)
class GridRequest:
    """The paper's Table 1 over ``members`` and ``nonmembers``: every normalization × feature extractor × context
    of ``contexts``, on the same folds, with ``config``'s model, query and meta-classifier settings."""

    members: Sequence[object]
    nonmembers: Sequence[object]
    contexts: tuple[int, ...]
    config: TrainConfig = field(default_factory=TrainConfig)
    model: LoadedModel | None = None
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)


@dataclass
class GridResult(Result):
    """``table``: one row per configuration; ``skipped``: the documents left out."""

    schema: ClassVar[str] = "train"
    table: pd.DataFrame
    skipped: list[dict]
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        return self.table


def grid(request: GridRequest) -> GridResult:
    """Every configuration of the meta-classifier on the same folds (``audit.meta.grid``): a look at all of them on
    the test folds (``train`` makes the honest choice)."""
    from docaudit.audit import meta

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        table = meta.grid(r.members, r.nonmembers, r.config, list(r.contexts), r.model, run, reading.skips, run.pool)
    body = table.to_dict(orient="records")
    return GridResult(table, reading.skips.as_json(), envelope_of("train", body, r.run))


@dataclass(frozen=True)
class PredictRequest:
    """A verdict on each of ``documents`` under the saved classifier ``classifier`` (None: the shipped one) at level
    ``alpha``. ``model``: the target; a ModelConfig naming no model on the default backend, or None, means the
    model the classifier's card names, used as ``access`` grants it."""

    documents: Sequence[object]
    classifier: Path | None = None
    model: ModelConfig | LoadedModel | None = None
    access: CardAccess = field(default_factory=CardAccess)
    alpha: float = DEFAULT_ALPHA
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)


@dataclass
class PredictResult(Result):
    """``rows``: one per document judged (verdict, p-value, q-value, reasons ...), then one per document left out
    (``file``, ``skipped``: why); ``skipped``: the documents left out."""

    schema: ClassVar[str] = "predict"
    rows: list[dict]
    skipped: list[dict]
    envelope: dict


def card_or_user_model(model: ModelConfig | LoadedModel | None) -> ModelConfig | LoadedModel | None:
    """The model ``predict`` queries: the user's when it names one (a model, or a backend other than the default),
    else None, the model the classifier's card names."""
    if isinstance(model, ModelConfig) and not model.model and model.backend == ModelConfig.backend:
        return None
    return model


def predict(request: PredictRequest) -> PredictResult:
    """The verdict on each document under a saved meta-classifier (``audit.meta.predict``), the documents that
    cannot be used as rows saying why."""
    from docaudit.audit import meta

    r = request
    reading = recorded(r.reading)
    model = card_or_user_model(r.model)
    with scaled(r.run) as run:
        rows = meta.predict(r.documents, r.classifier, model, r.access, r.alpha, reading.skips, run)
    rows.extend(skipped_rows(reading))  # the rows keep what they carry for the envelope (model, inputs)
    return PredictResult(rows, reading.skips.as_json(), envelope_of("predict", rows, r.run))
