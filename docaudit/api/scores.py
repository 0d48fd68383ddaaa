"""``score`` (raw scores per document), ``evaluate`` (every method on the same k-fold chunks) and ``sequence``
(every text scored whole, as benchmark papers report it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs, model_inputs, recorded, scaled, skipped_rows
from docaudit.audit.specs import EvaluationSpec
from docaudit.config import QueryConfig, SequenceConfig
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext

if TYPE_CHECKING:
    import pandas as pd

    from docaudit.audit.evaluation import MethodsEvaluation


@dataclass(frozen=True)
class ScoreRequest:
    """Raw scores of ``documents`` by the detectors ``detectors`` under ``models``, queried with ``query``."""

    documents: Sequence[object]
    models: ModelSpec = field(default_factory=ModelSpec)
    query: QueryConfig = field(default_factory=QueryConfig)
    detectors: DetectorSpec = field(default_factory=DetectorSpec)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)


@dataclass
class ScoreResult(Result):
    """``rows``: one per document scored (``file``, ``n_tokens``, ``context``, ``stride``, a score per method),
    then one per document left out (``file``, ``skipped``: why); ``skipped``: the documents left out."""

    schema: ClassVar[str] = "score"
    rows: list[dict]
    skipped: list[dict]
    envelope: dict


def score(request: ScoreRequest) -> ScoreResult:
    """Raw per-document detector scores (``audit.scoring.score_documents``), higher = more member-like."""
    from docaudit.audit.scoring import score_documents

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        rows = score_documents(r.documents, r.models, r.query, r.detectors, reading, run)
    rows.extend(skipped_rows(reading))  # the rows keep what they carry for the envelope (model, inputs)
    return ScoreResult(rows, reading.skips.as_json(), envelope_of("score", rows, r.run))


@dataclass(frozen=True)
class EvaluateRequest:
    """Every method of ``detectors`` and ``spec`` (meta-classifier, blind baselines, beyond-blind comparison) on the
    same k-fold chunks of ``members`` and ``nonmembers``; with ``out``, the tables, JSON and ROC curves written
    there (a new or empty folder, or an earlier evaluation with ``overwrite``)."""

    members: Sequence[object]
    nonmembers: Sequence[object]
    out: Path | None = None
    overwrite: bool = False
    models: ModelSpec = field(default_factory=ModelSpec)
    query: QueryConfig = field(default_factory=QueryConfig)
    detectors: DetectorSpec = field(default_factory=DetectorSpec)
    spec: EvaluationSpec = field(default_factory=EvaluationSpec)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.members, self.nonmembers, *model_inputs(self.models, self.detectors)))


@dataclass
class EvaluateResult(Result):
    """``evaluation``: the methods' table, folds, curves, per-document scores and run information; the frame: the
    table (a row per method × level)."""

    schema: ClassVar[str] = "evaluation"
    evaluation: MethodsEvaluation
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        return self.evaluation.table.drop(columns=["configs"], errors="ignore")

    def write(self, out: Path, overwrite: bool = False) -> None:
        """``evaluation.csv``/``.json``, the folds, the documents' scores and the ROC curves, into ``out``."""
        from docaudit.report.evaluation import write_evaluation

        write_evaluation(self.evaluation, Path(out), overwrite)


def evaluate(request: EvaluateRequest) -> EvaluateResult:
    """Every method on the same k-fold chunks (``audit.evaluation.evaluate_methods``)."""
    from docaudit.audit.evaluation import evaluate_methods, evaluation_json
    from docaudit.outputs import prepare_output

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        if r.out is not None:
            prepare_output(r.out, "evaluation", r.overwrite, r.inputs())
        evaluation = evaluate_methods(r.members, r.nonmembers, r.models, r.query, r.detectors, r.spec, reading, run)
    result = EvaluateResult(evaluation, envelope_of("evaluation", evaluation_json(evaluation), r.run))
    if r.out is not None:
        result.write(r.out, r.overwrite)
    return result


@dataclass(frozen=True)
class SequenceRequest:
    """Sequence-level evaluation of ``members`` and ``nonmembers`` (every text scored whole by every detector);
    ReCaLL's non-member prefix is ``recall_prefix``, or the text of ``recall_prefix_file``; with ``out``, the
    metrics and per-sample scores written there."""

    members: Sequence[object]
    nonmembers: Sequence[object]
    out: Path | None = None
    overwrite: bool = False
    models: ModelSpec = field(default_factory=ModelSpec)
    detectors: DetectorSpec = field(default_factory=DetectorSpec)
    config: SequenceConfig = field(default_factory=SequenceConfig)
    recall_prefix: str | None = None
    recall_prefix_file: Path | None = None
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        groups = (self.members, self.nonmembers, self.recall_prefix_file, *model_inputs(self.models, self.detectors))
        return local_inputs(groups)


@dataclass
class SequenceResult(Result):
    """``evaluation``: ``metrics`` (a frame), ``samples`` and ``info`` (``audit.sequence_level``); the frame: the
    metrics."""

    schema: ClassVar[str] = "sequence"
    evaluation: dict
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        return self.evaluation["metrics"]

    def write(self, out: Path, overwrite: bool = False) -> None:
        """The metrics (CSV, JSON) and every text's scores (CSV, JSONL) into ``out``."""
        from docaudit.report.sequence_level import write_sequence_evaluation

        write_sequence_evaluation(self.evaluation, Path(out), overwrite)


def sequence(request: SequenceRequest) -> SequenceResult:
    """Sequence-level evaluation (``audit.sequence_level.evaluate_sequences``)."""
    from docaudit.audit.sequence_level import evaluate_sequences, sequence_json
    from docaudit.corpus.documents import read_text
    from docaudit.outputs import prepare_output

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        if r.out is not None:
            prepare_output(r.out, "sequence", r.overwrite, r.inputs())
        prefix = r.recall_prefix if r.recall_prefix_file is None else read_text(r.recall_prefix_file)
        evaluation = evaluate_sequences(r.members, r.nonmembers, r.models, r.detectors, r.config, prefix, reading, run)
    result = SequenceResult(evaluation, envelope_of("sequence", sequence_json(evaluation), r.run))
    if r.out is not None:
        result.write(r.out, r.overwrite)
    return result
