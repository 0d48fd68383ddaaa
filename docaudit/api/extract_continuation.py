"""``extract --mode continuation``: what a model that only writes text gives back of each book when asked to
continue its passages, beside the never-seen texts (``audit.extraction_continuation``); the server, its cache
and its cost as ``probe`` has them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from docaudit.api.common import envelope_of, local_inputs, recorded
from docaudit.api.probes import ProbeRequest, _as_served, _writer
from docaudit.config import ContinuationConfig, ExtractConfig, ModelConfig
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext

MEASURED = (
    "what the model wrote after each passage's opening, compared with the passage's real continuation: a long "
    "common run is text written back, whether from training on the book, quotations of it elsewhere or common "
    "phrases; it is not a membership test"
)


@dataclass(frozen=True)
class ContinuationRequest:
    """The parts of an ``ExtractRequest`` that extraction by continuation reads (its fields, the same names)."""

    books: Sequence[object]
    model: ModelConfig | LoadedModel
    library: Sequence[object] | None
    config: ExtractConfig
    continuation: ContinuationConfig
    reading: DocumentSpec
    run: RunContext
    out: Path | None = None
    overwrite: bool = False

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.library, self.model))


def _probe_request(r: ContinuationRequest) -> ProbeRequest:
    """The ``probe`` request that sends the same prompts (its writer, its cost)."""
    return ProbeRequest(r.books, r.model, r.library, r.continuation.layout(r.config.temperature), reading=r.reading,
                        run=r.run)  # fmt: skip


def read_texts(r: ContinuationRequest) -> tuple[DocumentSpec, list, list]:
    """An extract request's output folder checked (``r.out``) and its texts read (either mode): the reading as
    recorded, the books and the library texts (none without ``r.library``)."""
    from docaudit.outputs import prepare_output

    if r.out is not None:
        prepare_output(r.out, "extract", r.overwrite, r.inputs())
    return _texts(r, r.run.progress)


def planned_texts(r: ContinuationRequest) -> list:
    """An extract request's books and library texts read without progress, nothing written (``--dry-run``)."""
    _, docs, library = _texts(r, False)
    return docs + library


def _texts(r: ContinuationRequest, progress: bool) -> tuple[DocumentSpec, list, list]:
    from docaudit.corpus.documents import load_documents

    reading = recorded(r.reading)
    read = (reading.raw, progress, reading.skips, reading.normalize_chars)
    return reading, load_documents(r.books, *read), [] if r.library is None else load_documents(r.library, *read)


def continuation_result(r: ContinuationRequest) -> tuple[list[dict], dict, list[dict]]:
    """The books' records, the JSON output with its envelope and the rows (one per passage) of an
    extract request in continuation mode; with ``out``, ``extract.json`` and ``extract.csv`` written."""
    from docaudit.audit.extraction_continuation import continuation_audit
    from docaudit.provenance import document_records
    from docaudit.query.rates import generation_key, record_generation
    from docaudit.report.extraction_continuation import passage_rows, text_record, write_continuation

    reading, docs, library = read_texts(r)
    writer = _writer(r.model, r.continuation.endpoint)
    began = time.monotonic()
    found = continuation_audit(docs, library, writer, r.continuation, r.config.temperature, r.run.seed)
    served = _probe_request(r).served()
    if served:
        key = generation_key(_as_served(r.model), r.continuation.endpoint)
        record_generation(key, writer.sent, time.monotonic() - began)
    books = [text_record(t, b, r.config.passages) for t, b in zip(found["books"], found["baselines"])]
    body = {
        "settings": r.config.used(),
        "continuation": {**r.continuation.used(), "seed": r.run.seed},
        "measured": MEASURED,
        "books": books,
        "library": [text_record(t) for t in found["library"]],
        "skipped": reading.skips.as_json(),
        "inputs": document_records(docs, "judged")
        + document_records([t.document for t in found["library"]], "library"),
        "writer": {
            "identity": writer.identity,
            "endpoint": writer.endpoint,
            "requests": writer.sent,
            "cached": writer.cached,
            "tokens_sent": writer.prompt_tokens,
            "tokens_received": writer.generated_tokens,
        },
    }
    rows = passage_rows(found["books"] + found["library"])
    output = envelope_of("extract", body, r.run)
    if r.out is not None:
        write_continuation(output, rows, Path(r.out), r.overwrite)
    return books, output, rows


def continuation_plan(r: ContinuationRequest) -> dict:
    """What continuing ``r``'s texts would send and take, nothing sent (``--dry-run``): ``probe``'s plan for the
    same prompts."""
    from docaudit.api.probes import planned

    model = r.model if isinstance(r.model, ModelConfig) else r.model.config
    return planned(replace(_probe_request(r), model=model), [d.text for d in planned_texts(r)])
