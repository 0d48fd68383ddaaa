"""``extract`` (how much of each book a model writes back verbatim, beside what never-seen texts reach the same
way): :func:`extract_books` takes an :class:`ExtractRequest` and returns an :class:`ExtractResult` with one
:class:`BookExtraction` per book."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs
from docaudit.config import EXTRACT_NULL, ContinuationConfig, ExtractConfig, ModelConfig
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext


@dataclass(frozen=True)
class ExtractRequest:
    """Extract from each of ``books`` in ``model`` (default the embedded Gemma), run in this process; ``library``:
    never-seen texts put through the same way, the baseline of every book's figures; without it, the figures stored
    at ``stored_library`` (for the embedded model: ``config.EXTRACT_NULL``) where they were computed with this
    model and these settings. With ``out``,
    ``extract.json``, ``extract.csv``, ``extract.png`` and ``extract.html`` written there (a new or empty folder,
    or an earlier extract output with ``overwrite``). With ``config.mode`` ``continuation``, the model (a server the
    user names, or one run here) continues passages of each text as ``continuation`` lays them out, and what it
    writes is compared with the real continuations (``extract.json`` and ``extract.csv`` only)."""

    books: Sequence[object]
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    library: Sequence[object] | None = None
    config: ExtractConfig = field(default_factory=ExtractConfig)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)
    out: Path | None = None
    overwrite: bool = False
    stored_library: Path | None = EXTRACT_NULL
    continuation: ContinuationConfig = field(default_factory=ContinuationConfig)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.library, self.model))


@dataclass(frozen=True)
class BookExtraction:
    """One book's figures: the shares of its tokens inside a discoverable suffix (top-k sampling at the request's
    (n, p)) and a greedy-extractable one, the longest run covered end to end, the largest p_z (top-k and greedy),
    its passages (token and character positions, text) and ``baseline``, the never-seen texts' median and largest
    share and how many reach the book's (None without a library)."""

    file: str
    sha256: str
    tokens: int
    examples: int
    extractable_share: float
    greedy_share: float
    longest_run_tokens: int
    max_pz: float
    max_pz_greedy: float
    passages: list[dict]
    baseline: dict | None


@dataclass
class ExtractResult(Result):
    """``extract``: ``books`` (one :class:`BookExtraction` each; by continuation, each book's record), its JSON
    output with the envelope and ``rows``, one per example (by continuation, per passage) of every text (books and
    library)."""

    schema: ClassVar[str] = "extract"
    books: list[BookExtraction] | list[dict]
    body: dict
    rows: list[dict]
    envelope: dict


def extract_books(request: ExtractRequest) -> ExtractResult:
    """p_z of every example of every book and library text, the books' figures beside the library's
    (``audit.extraction.extract_audit``)."""
    from docaudit.api.extract_continuation import ContinuationRequest, read_texts
    from docaudit.audit.extraction import extract_audit
    from docaudit.audit.extraction_library import stored_baseline
    from docaudit.provenance import document_records, model_record
    from docaudit.query import rates
    from docaudit.query.extraction import require_logits
    from docaudit.query.models import load_model
    from docaudit.report.extraction import book_record, example_rows, library_record, write_extract

    r = request
    if r.config.mode == "continuation":
        from docaudit.api.extract_continuation import continuation_result

        books, output, rows = continuation_result(_continuation(r, ContinuationRequest))
        return ExtractResult(books, output, rows, output)
    require_logits(r.model)
    reading, docs, library = read_texts(_continuation(r, ContinuationRequest))
    lm = r.model if isinstance(r.model, LoadedModel) else load_model(r.model)
    began = time.monotonic()
    stored, about = (None, {"source": "--null-library"}) if library else stored_baseline(r.stored_library, lm, r.config)
    with rates.clock() as spent:
        found = extract_audit(docs, library, lm, r.config, stored)
    texts = found["books"] + found["library"]
    if all(t.ran == t.summary["examples"] for t in texts):  # a rate only from a run that read nothing cached
        ran = sum(t.ran for t in texts) * (r.config.example_tokens + 1)
        seconds = time.monotonic() - began - spent["load"]  # the deferred weights' loading left out
        rates.record_controls(lm.config, "extract_per_s", ran, seconds)
    settings = r.config.used()
    books = [book_record(t, b) for t, b in zip(found["books"], found["baselines"])]
    body = {
        "settings": settings,
        "books": books,
        "library": [library_record(t) for t in found["library"]],
        "baseline": about,
        "skipped": reading.skips.as_json(),
        "inputs": document_records(docs, "judged")
        + document_records([t.document for t in found["library"]], "library"),
        "model": model_record(lm),
    }
    rows = [row for t in texts for row in example_rows(t, settings)]
    output = envelope_of("extract", body, r.run)
    if r.out is not None:
        write_extract(output, rows, found["books"], Path(r.out), r.overwrite)
    return ExtractResult([_book(b) for b in books], output, rows, output)


def _continuation(request: ExtractRequest, kind: type):
    """The parts of ``request`` that extraction by continuation reads, as ``kind``."""
    return kind(**{name: getattr(request, name) for name in kind.__dataclass_fields__})


def _book(record: dict) -> BookExtraction:
    return BookExtraction(**{name: record[name] for name in BookExtraction.__dataclass_fields__})


def planned(request: ExtractRequest) -> dict:
    """What ``request`` would take, nothing loaded (``--dry-run``): its texts read, tokens estimated from their
    sizes, the examples and the time (``audit.costs.extract_plan``)."""
    from docaudit.api.extract_continuation import ContinuationRequest, continuation_plan, planned_texts
    from docaudit.audit.costs import extract_plan
    from docaudit.query.extraction import require_logits

    r = request
    if r.config.mode == "continuation":
        return continuation_plan(_continuation(r, ContinuationRequest))
    model = r.model.config if isinstance(r.model, LoadedModel) else r.model
    require_logits(model)
    docs = planned_texts(_continuation(r, ContinuationRequest))
    plan = extract_plan([len(d.text.encode("utf-8")) for d in docs], r.config.example_tokens, r.config.stride, model,
                        r.config.first_tokens)  # fmt: skip
    return {
        "texts": plan.documents,
        "tokens": plan.tokens,
        "examples": plan.windows,
        "tokens_run": plan.pass_tokens,
        "seconds": plan.seconds,
        "steps": [(s.name, s.amount, s.seconds) for s in plan.steps],
        "rate": "measured on this machine" if "query" in plan.rates.measured else "documented: none measured here yet",
        "tokens_per_s": plan.rates.tokens_per_s,
        "server_requests": plan.windows if model.backend == "openai" else None,  # one echo request per example
    }
