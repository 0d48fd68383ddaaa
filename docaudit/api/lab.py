"""``lab`` (a target trained on a random half of a pool, then every method on the true labels), ``traps make``
(plant generated sequences in documents before publishing them) and ``traps detect`` (test a model for them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs, scaled
from docaudit.config import DetectorConfig, ModelConfig, TrapConfig
from docaudit.query.loaded import LoadedModel
from docaudit.run import RunContext

if TYPE_CHECKING:
    import pandas as pd

    from docaudit.audit.traps import TrapDetection
    from docaudit.lab.experiment import LabResult, LabSpec
    from docaudit.lab.traps import TrapLabResult, TrapPlan


def _lab_spec() -> LabSpec:
    from docaudit.lab.experiment import LabSpec

    return LabSpec()


@dataclass(frozen=True)
class LabRequest:
    """The randomized controlled experiment over the pool ``corpus``, resumable in ``out`` (``overwrite``:
    discard an earlier one): ``spec`` says what is trained and evaluated; ``traps``, copyright traps planted in the
    members and tested (None: none)."""

    corpus: Path
    out: Path
    spec: LabSpec = field(default_factory=_lab_spec)
    traps: TrapPlan | None = None
    overwrite: bool = False
    run: RunContext = field(default_factory=RunContext)


@dataclass
class LabOutcome(Result):
    """``lab``: the experiment (``lab.experiment.LabResult``, or ``lab.traps.TrapLabResult`` with traps); the
    frame: the methods' table, or with traps the detection table."""

    schema: ClassVar[str] = "lab"
    lab: LabResult | TrapLabResult
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        from docaudit.lab.traps import TrapLabResult
        from docaudit.report.traps import detection_table

        if isinstance(self.lab, TrapLabResult):
            return pd.DataFrame(detection_table(self.lab.detection))
        return self.lab.evaluation.table.drop(columns=["configs"], errors="ignore")


def lab(request: LabRequest) -> LabOutcome:
    """The randomized controlled experiment (``lab.experiment.run_lab``)."""
    from docaudit.lab.experiment import run_lab

    r = request
    with scaled(r.run) as run:
        result = run_lab(r.corpus, Path(r.out), r.spec, r.traps, run, r.overwrite)
    return LabOutcome(result, envelope_of("lab", result.summary(), r.run))


@dataclass(frozen=True)
class TrapsMakeRequest:
    """Copyright traps written by ``generator`` as ``config`` says, planted in copies of ``documents`` (read
    verbatim) written to ``out``; the private registry written to ``registry`` (never inside ``out``)."""

    documents: Sequence[object]
    out: Path
    registry: Path | str
    generator: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    config: TrapConfig = field(default_factory=TrapConfig)
    overwrite: bool = False
    run: RunContext = field(default_factory=RunContext)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.documents, self.generator))


@dataclass
class TrapsMakeResult(Result):
    """``plan``: the sequences generated, planted and rejected; ``rows``: one per trapped copy written."""

    schema: ClassVar[str] = "traps-make"
    plan: TrapPlan
    rows: list[dict]
    envelope: dict


def check_traps_outputs(request: TrapsMakeRequest) -> None:
    """Check the folder of the trapped copies and the registry's place as they would be written, nothing touched."""
    from docaudit.outputs import prepare_output
    from docaudit.report.traps import check_registry_path

    prepare_output(request.out, "traps", request.overwrite, request.inputs())
    check_registry_path(Path(request.registry), Path(request.out), request.overwrite)


def traps_make(request: TrapsMakeRequest) -> TrapsMakeResult:
    """Plant copyright traps (``audit.traps.make_traps``) in each document and write the trapped copies and the
    private registry; the originals are only read."""
    from docaudit.audit.traps import make_traps
    from docaudit.corpus.documents import load_documents
    from docaudit.report.traps import planted_rows, write_trapped

    r = request
    check_traps_outputs(r)
    documents = load_documents(r.documents, raw=True, progress=r.run.progress)
    plan = make_traps(documents, r.generator, r.config, r.run.seed, r.run.progress)
    write_trapped(plan, Path(r.out), Path(r.registry), r.overwrite, r.inputs())
    rows = planted_rows(plan, Path(r.out))
    body = {"registry": str(r.registry), "documents": rows, "candidates": plan.candidates, "rejected": plan.rejected}
    return TrapsMakeResult(plan, rows, envelope_of("traps-make", body, r.run))


@dataclass(frozen=True)
class TrapsDetectRequest:
    """Test ``model`` for the traps of ``registry``, with the reference model ``ref_model`` for the ratio score,
    the verdicts at level ``alpha``."""

    registry: Path
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    ref_model: ModelConfig | LoadedModel | None = None
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    alpha: float = TrapConfig.alpha
    run: RunContext = field(default_factory=RunContext)


@dataclass
class TrapsDetectResult(Result):
    """``detection``: per document and pooled, AUC traps vs controls, the exact p-value and the verdict; the frame:
    the detection table."""

    schema: ClassVar[str] = "traps-detect"
    detection: TrapDetection
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        from docaudit.report.traps import detection_table

        return pd.DataFrame(detection_table(self.detection))


def traps_detect(request: TrapsDetectRequest) -> TrapsDetectResult:
    """Test a model for the traps of a registry (``audit.traps.detect_traps``)."""
    from docaudit.audit.traps import detect_traps
    from docaudit.corpus.traps import read_registry

    r = request
    registry = read_registry(r.registry)
    detection = detect_traps(registry, r.model, r.ref_model, r.detector, r.alpha, r.run.progress)
    return TrapsDetectResult(detection, envelope_of("traps-detect", detection.as_json(), r.run))
