"""The Python API: one function per command, each taking one typed request and returning one result.

``api.predict(PredictRequest(["book.txt"]))`` returns a :class:`PredictResult`; every command likewise (the table
in docs/architecture.md). A request is a frozen dataclass whose fields are typed: the documents and output folder,
and the groups of settings that travel together (:class:`docaudit.run.ModelSpec`, ``DetectorSpec``,
``DocumentSpec``, ``RunContext`` with the one seed, progress, the command line and Ray; the configurations of
:mod:`docaudit.config` and the audits' specs), whose defaults live there. A result carries its JSON output with its
envelope (``to_json()``), its rows as a pandas frame (``to_frame()``) and, where it writes a folder, ``write(out)``.

Each function checks its output folder before anything is queried, runs the audit from :mod:`docaudit.audit` (or
the experiment from :mod:`docaudit.lab`) and writes the files through :mod:`docaudit.report`. :func:`check` makes the
checks a command makes before a model loads, :func:`estimate` what ``--dry-run`` prints. The command line parses its
options into a request, calls one of these and prints the result."""

from docaudit.api.audit import AuditPlan, AuditResult, audit, plan_audit
from docaudit.api.audit_request import AuditRequest
from docaudit.api.books import ControlsRequest, ControlsResult, MapOutcome, MapRequest, map_books, synthetic_controls
from docaudit.api.cache import (
    CacheClearRequest,
    CacheClearResult,
    CacheInfoRequest,
    CacheInfoResult,
    cache_clear,
    cache_info,
)
from docaudit.api.classifier import (
    GridRequest,
    GridResult,
    PredictRequest,
    PredictResult,
    TrainRequest,
    TrainResult,
    grid,
    predict,
    train,
)
from docaudit.api.common import Result
from docaudit.api.data import (
    DataCheckRequest,
    DataCheckResult,
    DatasetTestOutcome,
    DatasetTestRequest,
    data_check,
    dataset_test,
)
from docaudit.api.extract import BookExtraction, ExtractRequest, ExtractResult, extract_books
from docaudit.api.lab import (
    LabOutcome,
    LabRequest,
    TrapsDetectRequest,
    TrapsDetectResult,
    TrapsMakeRequest,
    TrapsMakeResult,
    lab,
    traps_detect,
    traps_make,
)
from docaudit.api.preflight import Checked, Checks, Estimate, check, estimate
from docaudit.api.probes import ProbeRequest, ProbeResult, probe
from docaudit.api.report import MethodReport, ReportRequest, ReportResult, report
from docaudit.api.scores import (
    EvaluateRequest,
    EvaluateResult,
    ScoreRequest,
    ScoreResult,
    SequenceRequest,
    SequenceResult,
    evaluate,
    score,
    sequence,
)
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext

__all__ = [
    "AuditPlan",
    "AuditRequest",
    "AuditResult",
    "audit",
    "plan_audit",
    "BookExtraction",
    "ExtractRequest",
    "ExtractResult",
    "extract_books",
    "ProbeRequest",
    "ProbeResult",
    "probe",
    "CacheClearRequest",
    "CacheClearResult",
    "CacheInfoRequest",
    "CacheInfoResult",
    "Checked",
    "Checks",
    "ControlsRequest",
    "ControlsResult",
    "DataCheckRequest",
    "DataCheckResult",
    "DatasetTestOutcome",
    "DatasetTestRequest",
    "DetectorSpec",
    "DocumentSpec",
    "Estimate",
    "EvaluateRequest",
    "EvaluateResult",
    "GridRequest",
    "GridResult",
    "LabOutcome",
    "LabRequest",
    "MapOutcome",
    "MapRequest",
    "MethodReport",
    "ModelSpec",
    "PredictRequest",
    "PredictResult",
    "ReportRequest",
    "ReportResult",
    "Result",
    "RunContext",
    "ScoreRequest",
    "ScoreResult",
    "SequenceRequest",
    "SequenceResult",
    "TrainRequest",
    "TrainResult",
    "TrapsDetectRequest",
    "TrapsDetectResult",
    "TrapsMakeRequest",
    "TrapsMakeResult",
    "cache_clear",
    "cache_info",
    "check",
    "data_check",
    "dataset_test",
    "estimate",
    "evaluate",
    "grid",
    "lab",
    "map_books",
    "predict",
    "report",
    "score",
    "sequence",
    "synthetic_controls",
    "traps_detect",
    "traps_make",
    "train",
]
