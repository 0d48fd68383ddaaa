"""``dataset-test`` (were the suspect documents, as a set, trained on?) and ``data check`` (two document sets
compared before any model is queried)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

from docaudit.api.common import Result, envelope_of, recorded, scaled
from docaudit.audit.dataset_level import DatasetTestResult
from docaudit.config import DatasetTestConfig, MetaConfig, ModelConfig, QueryConfig
from docaudit.inference.verdicts import DEFAULT_ALPHA
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext


@dataclass(frozen=True)
class DatasetTestRequest:
    """The dataset-level test of ``suspect`` against the known non-members ``nonmembers``: the detectors of
    ``config`` on ``model`` queried with ``query``, the verdict at level ``alpha``."""

    suspect: Sequence[object]
    nonmembers: Sequence[object]
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    config: DatasetTestConfig = field(default_factory=DatasetTestConfig)
    alpha: float = DEFAULT_ALPHA
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)


@dataclass
class DatasetTestOutcome(Result):
    """``test``: the p-value, statistic, blind p-value and verdict; ``rows``: every document's scores;
    ``skipped``: the documents left out."""

    schema: ClassVar[str] = "dataset-test"
    test: DatasetTestResult
    rows: list[dict]
    skipped: list[dict]
    envelope: dict


def dataset_test(request: DatasetTestRequest) -> DatasetTestOutcome:
    """The dataset-level test (``audit.dataset_level.dataset_test_documents``)."""
    from docaudit.audit.dataset_level import dataset_test_documents

    r = request
    reading = recorded(r.reading)
    with scaled(r.run) as run:
        test, scores = dataset_test_documents(
            r.suspect, r.nonmembers, r.model, r.query, r.config, reading, run, r.alpha
        )
    skipped = reading.skips.as_json()
    body = {**asdict(test), "query": r.query.used(r.run.seed), "skipped": skipped, "scores": scores}
    return DatasetTestOutcome(test, scores, skipped, envelope_of("dataset-test", body, r.run))


@dataclass(frozen=True)
class DataCheckRequest:
    """Two document sets compared with no model: counts, lengths, years, leftover boilerplate, and the blind
    baseline between them on ``folds`` folds."""

    set_a: object
    set_b: object
    folds: int = MetaConfig.folds
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)


@dataclass
class DataCheckResult(Result):
    """``check``: each set's statistics (``a``, ``b``), the blind baseline, the warning, the documents left out
    (``skipped``) and the inputs; ``rows``: one per set, its name and scalar statistics."""

    schema: ClassVar[str] = "data-check"
    check: dict
    rows: list[dict]
    envelope: dict


def data_check(request: DataCheckRequest) -> DataCheckResult:
    """Statistics of two document sets and the blind baseline between them (``audit.datacheck.check_sets``)."""
    from docaudit.audit.datacheck import check_sets
    from docaudit.corpus.documents import load_documents
    from docaudit.provenance import document_records

    r = request
    reading = recorded(r.reading)
    read = {"raw": reading.raw, "progress": r.run.progress, "skips": reading.skips}
    docs_a, docs_b = (load_documents([s], **read, normalize_chars=reading.normalize_chars) for s in (r.set_a, r.set_b))
    check = check_sets(
        docs_a, docs_b, folds=r.folds, seed=r.run.seed, progress=r.run.progress, drop_duplicates=reading.drop_duplicates
    )
    inputs = document_records(docs_a, "a") + document_records(docs_b, "b")
    check = check | {"skipped": reading.skips.as_json(), "inputs": inputs}
    rows = [
        {"set": name} | {k: v for k, v in check[key].items() if not isinstance(v, (dict, list))}
        for key, name in (("a", r.set_a), ("b", r.set_b))
    ]
    return DataCheckResult(check, rows, envelope_of("data-check", check, r.run))
