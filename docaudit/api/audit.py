"""``audit``: one book, one command, one case file. From what the user gives (the kind of target, a classifier,
known non-members, a null library, a trap registry, a time budget) it plans the tests that can give a valid answer
(``api.audit_tests``), says for each why it runs or is skipped, estimates the time before any model loads, runs
them (each through its own command, cached and resumable as that command is), and makes one statement per book
with an error rate that holds whatever the dependence between the tests (``inference.combine``), beside each
test's own verdict and what the project measured of its power on this model (``config.power``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from docaudit.api.audit_request import AuditRequest
from docaudit.api.audit_tests import TESTS, Outcome, key, model_key, sum_or_none, target_kind
from docaudit.api.common import Result, envelope_of, recorded
from docaudit.errors import DocauditError, ModelError

COMBINATION = (
    "Holm–Bonferroni over the tests run for the book (valid whatever their dependence); a test that answered "
    "inconclusive contributes nothing (its p-value is taken as 1) but is counted"
)


@dataclass
class Planned:
    """One test of the plan: runs (``request``, its estimated ``seconds``, None when unknown) or is skipped
    (``why``)."""

    name: str
    what: str
    why: str | None = None
    request: object | None = None
    seconds: float | None = None

    @property
    def runs(self) -> bool:
        return self.why is None


@dataclass
class AuditPlan:
    """Every registered test, in order, each run or skipped; ``kind``: the target's kind."""

    kind: str
    tests: list[Planned]

    def running(self) -> list[Planned]:
        return [t for t in self.tests if t.runs]

    @property
    def seconds(self) -> float | None:
        """The estimated time of the tests that run (None when one has no estimate)."""
        return sum_or_none(t.seconds for t in self.running())

    def as_json(self) -> list[dict]:
        return [
            {"test": t.name, "what": t.what, "runs": t.runs, "why": t.why, "estimated_seconds": t.seconds}
            for t in self.tests
        ]


def plan_audit(request: AuditRequest) -> AuditPlan:
    """The tests that can give a valid answer for ``request``, within its budget, each estimated from its own
    command's ``--dry-run`` estimate, nothing loaded. Refused in one line: no book, an output folder that would be
    refused, a target for which no test can run (saying what would let one run), a budget too small for any test."""
    from docaudit.api.preflight import document_files
    from docaudit.outputs import prepare_output

    r = request
    if not r.books:
        raise DocauditError("give at least one book")
    document_files(r.books)
    if r.out is not None:
        prepare_output(r.out, "audit", r.overwrite, r.inputs())
    kind = target_kind(r)
    tests = []
    for test in TESTS.values():
        why = test.blocked(r)
        planned = Planned(test.name, test.what, why)
        if why is None:
            planned.request = test.request(r)
            planned.seconds = test.seconds(planned.request)
        tests.append(planned)
    if not any(t.runs and TESTS[t.name].counted for t in tests):
        needs = "; ".join(f"{t.name} {t.why}" for t in tests if t.why is not None)
        alone = [t.name for t in tests if t.runs]
        also = f" (figures only: docaudit {' and '.join(alone)} BOOK gives them alone)" if alone else ""
        raise DocauditError(f"no test can run on this {kind} target: {needs}{also}")
    _fit_budget(tests, r.config.budget)
    return AuditPlan(kind, tests)


def _fit_budget(tests: list[Planned], budget: float | None) -> None:
    """Skip the tests that do not fit in ``budget`` minutes, in order; refuse a budget too small for any of them."""
    if budget is None:
        return
    runnable = [t for t in tests if t.runs]
    left = budget * 60
    for t in runnable:
        if t.seconds is None or t.seconds <= left:
            left -= t.seconds or 0.0
            continue
        t.why, t.request = f"over the budget: needs ~{t.seconds / 60:.1f} min, {left / 60:.1f} min left", None
    if not any(t.runs for t in tests):
        quickest = min(runnable, key=lambda t: t.seconds)
        raise DocauditError(
            f"--budget {budget:g} min is too small for any test: the quickest, {quickest.name}, needs "
            f"~{quickest.seconds / 60:.1f} min"
        )


@dataclass
class AuditResult(Result):
    """``audit``: the plan, per book the statement with each test's verdict, numbers and measured power, each
    test's own output; ``rows``: one per book and test."""

    schema: ClassVar[str] = "audit"
    body: dict
    rows: list[dict]
    envelope: dict

    def write(self, out: Path, overwrite: bool = False) -> None:
        """``audit.json`` and ``audit.html`` (the case file) into ``out``."""
        from docaudit.report.audit import write_audit

        write_audit(self.envelope, Path(out), overwrite)


def audit(
    request: AuditRequest, plan: AuditPlan | None = None, starting: Callable[[Planned], None] | None = None
) -> AuditResult:
    """Run the planned tests (``plan``, else :func:`plan_audit`), each through its own command; ``starting`` is told
    of each test as it starts. A test that refuses its input is reported as failed ("inconclusive" for every book,
    still counted) and the statement per book combines the others; a model that cannot be loaded or reached stops
    the run (``ModelError``)."""
    from docaudit.corpus.documents import load_documents
    from docaudit.provenance import document_records

    r = request
    plan = plan or plan_audit(r)
    reading = recorded(r.reading)
    docs = load_documents(r.books, reading.raw, False, reading.skips, reading.normalize_chars)
    found: dict[str, dict[str, Outcome]] = {}
    outputs: dict[str, dict] = {}
    for planned in plan.running():
        if starting is not None:
            starting(planned)
        try:
            found[planned.name], outputs[planned.name] = TESTS[planned.name].run(planned.request)
        except ModelError:  # the model itself cannot be loaded or reached: no test can answer
            raise
        except DocauditError as e:  # one test's refusal of its input: the others still answer
            reason = f"failed: {e}"
            found[planned.name] = {key(d.path): Outcome("inconclusive", reason, None) for d in docs}
            outputs[planned.name] = {"error": str(e)}
    books = [_book(d, found, r) for d in docs]
    body = {
        "target_kind": plan.kind,
        "alpha": r.config.alpha,
        "budget_minutes": r.config.budget,
        "combination": COMBINATION,
        "plan": plan.as_json(),
        "estimated_seconds": plan.seconds,
        "books": books,
        "tests": outputs,
        "skipped": reading.skips.as_json(),
    }
    model = next((o["model"] for o in outputs.values() if o.get("model")), None)
    envelope = envelope_of("audit", body, r.run)
    envelope.update(inputs=document_records(docs, "judged"), model=model, seed=r.run.seed)
    rows = [_row(b, t) for b in books for t in b["tests"]]  # the figures beside the statement are in the JSON only
    result = AuditResult(body, rows, envelope)
    if r.out is not None:
        result.write(r.out, r.overwrite)
    return result


def _measured(name: str, r: AuditRequest) -> list:
    """What the project measured ``name`` to find on this model (``config.power``)."""
    from docaudit.config.power import power_of

    return power_of(name, model_key(r.model), TESTS[name].setting(r))


def _power_words(measured: list) -> str:
    """The measurements in words, or that none was made on this model."""
    from docaudit.config.power import NOT_MEASURED

    return "; ".join(p.found for p in measured) or NOT_MEASURED


def _book(doc, found: dict[str, dict[str, Outcome]], r: AuditRequest) -> dict:
    """One book's statement, with each test's verdict, numbers, adjusted p-value and measured power."""
    from docaudit.inference.combine import statement

    outcomes, figures = {}, {}
    for name, per_book in found.items():
        got = per_book.get(key(doc.path)) or per_book.get(doc.id)
        if got is not None:
            (outcomes if TESTS[name].counted else figures)[name] = got
    said = statement({n: o.p_value for n, o in outcomes.items()}, r.config.alpha) if outcomes else None
    tests = []
    for name, o in outcomes.items():
        measured = _measured(name, r)
        tests.append({
            "test": name,
            "verdict": o.verdict,
            "reason": o.reason,
            "p_value": o.p_value,
            "p_adjusted": said.adjusted[name],
            "numbers": o.numbers,
            "power": [{"found": p.found, "measured_on": p.measured_on, "source": p.source} for p in measured],
            "power_words": _power_words(measured),
        })  # fmt: skip
    return {
        "file": doc.path,
        "id": doc.id,
        "title": doc.title,
        "sha256": doc.sha256,
        "verdict": "inconclusive" if said is None else said.verdict,
        "p_value": None if said is None else said.p_value,
        "tests_counted": 0 if said is None else said.m,
        "tests": tests,
        "figures": {
            name: {"reason": o.reason, **o.numbers, "power_words": _power_words(_measured(name, r))}
            for name, o in figures.items()
        },
    }


def _row(book: dict, test: dict) -> dict:
    """One CSV row: the book's statement, then one test's verdict, p-values, measured power and numbers."""
    return {
        "file": book["file"],
        "statement": book["verdict"],
        "statement_p_value": book["p_value"],
        "test": test["test"],
        "verdict": test["verdict"],
        "reason": test["reason"],
        "p_value": test["p_value"],
        "p_adjusted": test["p_adjusted"],
        "power": test["power_words"],
        **test["numbers"],
    }
