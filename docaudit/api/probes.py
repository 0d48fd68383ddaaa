"""``probe`` (was each book in the training data of a model that only writes text, judged by what it writes about the
book's passages against what it writes about never-seen texts)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs, recorded
from docaudit.config import ModelConfig, ProbeConfig
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext


@dataclass(frozen=True)
class ProbeRequest:
    """Probe each of ``books`` in ``model``: a server the user names (``api_base``, its ``endpoint`` in
    ``config``), or a causal model run in this process (``model``, default the embedded Gemma). The null: the
    never-seen texts ``library``, probed the same way. DE-COP's paraphrases from the JSON-lines file ``paraphrases``,
    else written by ``paraphraser`` (run in this process; default the embedded Gemma). With ``out``, ``probe.json``
    and ``probe.csv`` written there (a new or empty folder, or an earlier probe output with ``overwrite``)."""

    books: Sequence[object]
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    library: Sequence[object] | None = None
    config: ProbeConfig = field(default_factory=ProbeConfig)
    paraphrases: Path | None = None
    paraphraser: ModelConfig | LoadedModel | None = None
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)
    out: Path | None = None
    overwrite: bool = False

    def served(self) -> bool:
        """Whether the model is a server the user named (else it runs in this process)."""
        return isinstance(self.model, ModelConfig) and bool(_as_served(self.model).api_base)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.library, self.paraphrases, self.paraphraser))


@dataclass
class ProbeResult(Result):
    """``probe``: the books' statistics and verdicts, the library's, the null in words, the smallest attainable
    p-value, the settings, the model and the skipped documents; ``rows``: one per book."""

    schema: ClassVar[str] = "probe"
    probe: dict
    rows: list[dict]
    envelope: dict


def _as_served(model: ModelConfig) -> ModelConfig:
    """``--model http://HOST:PORT/v1#NAME`` as ``--api-base`` and ``--api-model`` (as the scoring backend reads it)."""
    if model.model is None or not model.model.startswith(("http://", "https://")):
        return model
    from docaudit.query.backends.api_client import split_url

    base, name = split_url(model.model)
    return replace(model, model=None, api_base=base, api_model=model.api_model or name)


def _writer(model: ModelConfig | LoadedModel, endpoint: str):
    from docaudit.query.chat import in_process_writer, served_writer
    from docaudit.query.models import load_model

    if isinstance(model, ModelConfig) and _as_served(model).api_base:
        return served_writer(_as_served(model), endpoint)
    return in_process_writer(model if isinstance(model, LoadedModel) else load_model(model))


def _sources(r: ProbeRequest) -> dict:
    """Where DE-COP's paraphrases come from: the user's file, else a paraphrasing model run in this process."""
    from docaudit.audit.probes import read_paraphrases

    if r.config.probe != "decop":
        return {}
    if r.paraphrases is not None:
        return {"file": read_paraphrases(r.paraphrases)}
    return {"paraphraser": _writer(r.paraphraser or ModelConfig(), "in-process")}


def probe(request: ProbeRequest) -> ProbeResult:
    """The generation-only probe of each book (``audit.probes.probe_audit``)."""
    from docaudit.audit.probes import probe_audit
    from docaudit.corpus.documents import load_documents
    from docaudit.outputs import prepare_output
    from docaudit.provenance import document_records
    from docaudit.query.rates import generation_key, record_generation
    from docaudit.report.probes import probe_json, probe_rows, write_probe

    r = request
    if r.out is not None:
        prepare_output(r.out, "probe", r.overwrite, r.inputs())
    reading = recorded(r.reading)
    read = (reading.raw, r.run.progress, reading.skips, reading.normalize_chars)
    docs = load_documents(r.books, *read)
    library_docs = None if r.library is None else load_documents(r.library, *read)
    sources = _sources(r)
    writer = _writer(r.model, r.config.endpoint)
    began = time.monotonic()
    result = probe_audit(docs, library_docs, writer, r.config, sources, r.run.seed, r.run.progress)
    if r.served():
        record_generation(generation_key(_as_served(r.model), r.config.endpoint), writer.sent, time.monotonic() - began)
    result.update(
        settings=r.config.used(r.run.seed),
        skipped=reading.skips.as_json(),
        inputs=document_records(docs, "judged") + document_records(library_docs or [], "library"),
        model={"identity": writer.identity, "endpoint": writer.endpoint},
    )
    if r.out is not None:
        write_probe(result, Path(r.out), r.overwrite)
    return ProbeResult(result, probe_rows(result), envelope_of("probe", probe_json(result), r.run))


def planned(request: ProbeRequest, texts: list[str]) -> dict:
    """What ``request`` would send and take for ``texts`` (its books and library as read), nothing sent
    (``--dry-run``): ``audit.probes.planned_cost`` at this machine's measured seconds per request for the model, else
    the documented rate."""
    from docaudit.audit.probes import planned_cost
    from docaudit.config.rules import GENERATION_SECONDS_PER_REQUEST
    from docaudit.query.rates import generation_key, measured

    r = request
    seconds = None
    if isinstance(r.model, ModelConfig):
        seconds = measured(generation_key(_as_served(r.model), r.config.endpoint), "request_s")
    cost = planned_cost(texts, r.config, r.served(), seconds or GENERATION_SECONDS_PER_REQUEST)
    cost["rate"] = "measured on this machine" if seconds else "documented: none measured here yet"
    cost["seconds_per_request"] = seconds or GENERATION_SECONDS_PER_REQUEST
    cost["server"] = _as_served(r.model).api_base if r.served() else None
    return cost
