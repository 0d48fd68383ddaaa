"""``report``: a verdict and a contamination rate per book, calibrated on known member and non-member books; with
several methods, one complete report per method in its own folder, each deciding at alpha over their number."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from docaudit.api.common import Result, local_inputs, model_inputs, recorded, scaled
from docaudit.audit.specs import ReportSpec
from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.run import DocumentSpec, ModelSpec, RunContext

if TYPE_CHECKING:
    import pandas as pd

    from docaudit.audit.contamination import ContaminationReport


@dataclass(frozen=True)
class ReportRequest:
    """Per-book contamination rates of ``books`` calibrated on ``calibrate_members`` and ``calibrate_nonmembers``,
    written to ``out`` (CSV, JSON, plots, an HTML page). ``methods``: the detectors that score the snippets (names
    or a comma-separated string; None: ``spec.contamination.method``); with several, one complete report per method
    in ``out/<method>/``, each deciding at ``spec.alpha`` divided by their number."""

    books: Sequence[object]
    calibrate_members: Sequence[object]
    calibrate_nonmembers: Sequence[object]
    out: Path
    overwrite: bool = False
    methods: Sequence[str] | str | None = None
    models: ModelSpec = field(default_factory=ModelSpec)
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    spec: ReportSpec = field(default_factory=ReportSpec)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)

    def method_names(self) -> list[str]:
        """The methods of the report, each once, in the order given; an unknown or missing one is an error."""
        from docaudit.methods.detectors import METHODS

        given = self.spec.contamination.method if self.methods is None else self.methods
        names = given.split(",") if isinstance(given, str) else list(given)
        methods = list(dict.fromkeys(m.strip() for m in names if m.strip()))
        if unknown := [m for m in methods if m not in METHODS]:
            raise DocauditError(f"--methods: unknown method(s) {', '.join(unknown)} (methods: {', '.join(METHODS)})")
        if not methods:
            raise DocauditError("--methods: give at least one method")
        return methods

    def folders(self) -> dict[str, Path]:
        """The folder of each method's report: ``out`` for one method, ``out/<method>`` for each of several."""
        methods = self.method_names()
        return {name: Path(self.out) if len(methods) == 1 else Path(self.out) / name for name in methods}

    def inputs(self) -> list:
        """Every local input: what an output folder must not be or contain."""
        groups = (self.books, self.calibrate_members, self.calibrate_nonmembers, *model_inputs(self.models))
        return local_inputs(groups)

    def of_method(self, method: str) -> ReportSpec:
        """The report's spec for ``method``, one of ``len(self.method_names())`` methods."""
        contamination = replace(self.spec.contamination, method=method)
        return replace(self.spec, contamination=contamination, n_methods=len(self.method_names()))


@dataclass
class MethodReport(Result):
    """One method's report: ``report`` (the books' rates and verdicts, the calibration, the snippets, ``info``),
    the folder ``out`` it was written to; its JSON is what ``out/report.json`` holds; the frame: the books, verdict
    first."""

    schema: ClassVar[str] = "report"
    method: str
    report: ContaminationReport
    out: Path
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        from docaudit.report.contamination import flat, verdict_first

        return flat(verdict_first(self.report.books))

    def write(self, out: Path, overwrite: bool = False) -> None:
        """The report's CSV, JSON, plots and HTML page into ``out``."""
        from docaudit.report.contamination import write_contamination_report

        write_contamination_report(self.report, Path(out), overwrite, self.envelope)


@dataclass
class ReportResult:
    """``reports``: one :class:`MethodReport` per method, in the order given. Its JSON and frame are those of its
    one report; with several, each report's own (``reports[method]``), the frame with a ``method`` column first."""

    reports: dict[str, MethodReport]

    def to_json(self) -> dict:
        if len(self.reports) > 1:
            raise DocauditError("several methods give one report each: read reports[method].to_json() of each")
        return next(iter(self.reports.values())).to_json()

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        if len(self.reports) == 1:
            return next(iter(self.reports.values())).to_frame()
        frames = {method: r.to_frame() for method, r in self.reports.items()}
        return pd.concat(frames, names=["method"]).reset_index(level=0).reset_index(drop=True)


def check_report_outputs(request: ReportRequest) -> dict[str, Path]:
    """Check the output folders of ``request`` as they would be written (with several methods, the folder holding
    them too), nothing touched. Returns the folder of each method."""
    from docaudit.outputs import prepare_output, prepare_parent

    folders = request.folders()
    if len(folders) > 1:
        prepare_parent(request.out, list(folders), request.inputs())
    for where in folders.values():
        prepare_output(where, "report", request.overwrite, request.inputs())
    return folders


def report(request: ReportRequest) -> ReportResult:
    """Per-book contamination rates (``audit.contamination.contamination_report``) by each method, each report
    written to its folder (``ReportRequest.folders``)."""
    from docaudit.audit.contamination import contamination_report
    from docaudit.audit.costs import measuring
    from docaudit.io import json_text
    from docaudit.provenance import envelope
    from docaudit.report.contamination import report_document

    r = request
    folders = check_report_outputs(r)
    reports = {}
    for method, where in folders.items():
        reading = recorded(replace(r.reading, skips=None) if len(folders) > 1 else r.reading)
        with measuring("report"):  # the report's work beside its passes, its plots and page included
            with scaled(r.run) as run:
                books = (r.books, r.calibrate_members, r.calibrate_nonmembers)
                result = contamination_report(*books, r.models, r.detector, r.of_method(method), reading, run)
            document = json.loads(json_text(envelope("report", report_document(result))))  # as report.json holds it
            reports[method] = MethodReport(method, result, where, document)
            reports[method].write(where, r.overwrite)
    return ReportResult(reports)
