"""``map`` (which chapters of a book score like trained text) and ``controls`` (each book tested against synthetic
suffixes a generator writes for its own prefixes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from docaudit.api.common import Result, envelope_of, local_inputs, recorded, scaled
from docaudit.audit.specs import MapSpec
from docaudit.config import CONTROLS_NULL, ControlsConfig, ModelConfig
from docaudit.query.loaded import LoadedModel
from docaudit.run import DocumentSpec, RunContext

if TYPE_CHECKING:
    import pandas as pd

    from docaudit.audit.localize import MapResult


@dataclass(frozen=True)
class MapRequest:
    """The map of ``books`` against the calibration books ``nonmembers`` (known non-members) under ``model``, as
    ``spec`` says; with ``out``, ``map.csv``/``.json``/``.png``/``.html`` written there (a new or empty folder, or an
    earlier map with ``overwrite``)."""

    books: Sequence[object]
    nonmembers: Sequence[object]
    out: Path | None = None
    overwrite: bool = False
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    spec: MapSpec = field(default_factory=MapSpec)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.nonmembers, self.model))


@dataclass
class MapOutcome(Result):
    """``map``: a row per segment of every book, a summary per book and the run's information; ``rows``: the
    segments' rows as ``map.csv`` holds them."""

    schema: ClassVar[str] = "map"
    map: MapResult
    rows: list[dict]
    envelope: dict

    def write(self, out: Path, overwrite: bool = False) -> None:
        """``map.csv``, ``map.json``, ``map.png`` and ``map.html`` into ``out``."""
        from docaudit.report.localize import write_map

        write_map(self.map, Path(out), overwrite)


def map_books(request: MapRequest) -> MapOutcome:
    """Which parts of each book score like trained text (``audit.localize``): every book cut into its chapters,
    each segment's p-value against windows of the calibration books of the same length inside one of their chapter
    bodies, near the same place,
    Benjamini–Hochberg over the book's segments, a verdict per segment."""
    from docaudit.audit.localize import map_documents
    from docaudit.corpus.documents import load_documents
    from docaudit.outputs import prepare_output
    from docaudit.query.models import load_model
    from docaudit.report.localize import map_frame, map_json

    r = request
    _check_segment_method(r)
    if r.out is not None:
        prepare_output(r.out, "map", r.overwrite, r.inputs())
    reading = recorded(r.reading)
    read = {"raw": reading.raw, "normalize_chars": reading.normalize_chars, "skips": reading.skips}
    judged = load_documents(r.books, **read, progress=r.run.progress)
    calibration = load_documents(r.nonmembers, **read, progress=r.run.progress)
    with scaled(r.run) as run:
        lm = r.model if isinstance(r.model, LoadedModel) else load_model(r.model)
        result = map_documents(judged, calibration, lm, r.spec, run.progress)
    result.info["skipped"] = reading.skips.as_json()
    if r.run.command is not None:
        result.info["command"] = list(r.run.command)
    rows = map_frame(result).to_dict(orient="records")
    outcome = MapOutcome(result, rows, envelope_of("map", map_json(result), r.run))
    if r.out is not None:
        outcome.write(r.out, r.overwrite)
    return outcome


def _check_segment_method(request: MapRequest) -> None:
    """Stop before anything loads when the map's method needs statistics the backend does not provide (one line
    naming the methods that would run with it)."""
    from docaudit.config import SEGMENT_METHODS
    from docaudit.methods.detectors.registry import METHODS
    from docaudit.query.backends import provides, require
    from docaudit.query.models import backend_name

    backend = backend_name(request.model)
    works = [m for m in SEGMENT_METHODS if set(METHODS[m].needs) <= provides(backend)]
    method = request.spec.config.method
    require(backend, f"--method {method}", METHODS[method].needs, works)


@dataclass(frozen=True)
class ControlsRequest:
    """Test each of ``books`` for membership in ``model`` against synthetic suffixes ``generator`` writes for the
    books' own prefixes: the null from the never-seen texts ``library``, a ``reference`` model that cannot have
    seen the books, or both; with neither, the library stored at ``stored_library`` (for the embedded model:
    ``config.CONTROLS_NULL``), refused unless it was computed with these models and settings. With ``out``,
    ``controls.json``/``.csv``/``.html`` written there (a new or empty folder, or an earlier controls output with
    ``overwrite``)."""

    books: Sequence[object]
    model: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    generator: ModelConfig | LoadedModel = field(default_factory=ModelConfig)
    reference: ModelConfig | LoadedModel | None = None
    library: Sequence[object] | None = None
    config: ControlsConfig = field(default_factory=ControlsConfig)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)
    out: Path | None = None
    overwrite: bool = False
    stored_library: Path | None = CONTROLS_NULL

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.library, self.model, self.generator, self.reference))

    @property
    def uses_stored_library(self) -> bool:
        """Whether the null is the stored library (no library and no reference given)."""
        return self.library is None and self.reference is None


@dataclass
class ControlsResult(Result):
    """``controls``: the books' tests and verdicts, the library's, the null in words, the settings, the models'
    records and the skipped documents; ``rows``: one per book."""

    schema: ClassVar[str] = "controls"
    controls: dict
    rows: list[dict]
    envelope: dict

    def to_frame(self) -> pd.DataFrame:
        """The rows ``--format csv`` prints (the reasons' sentences in ``reason``, their codes in ``reason_codes``)."""
        from docaudit.report.controls import csv_frame

        return csv_frame(self.rows)


def _loaded_models(request: ControlsRequest) -> dict[str, LoadedModel]:
    """The target, generator and reference (when given) loaded (a generator configured as the target is the
    target's loaded model), each able to score and write given text: run in this process (transformers, or a
    ``.gguf`` through llama.cpp) or served with prompt log-probabilities (a chat-only server is refused, naming
    ``docaudit probe``); the reference other than the target, and the generator too where no library calibrates
    the contrast (with one, the rank against the library's texts needs no second model)."""
    from docaudit.errors import DocauditError
    from docaudit.query.generate import require_given_text
    from docaudit.query.models import load_model

    given = {"target": request.model, "generator": request.generator, "reference": request.reference}
    given = {role: m for role, m in given.items() if m is not None}
    for role, m in given.items():
        require_given_text(m, f"the {role}")
    loaded = {}
    for role, m in given.items():
        same = role == "generator" and m == given["target"]
        loaded[role] = loaded["target"] if same else m if isinstance(m, LoadedModel) else load_model(m)
    for role, m in loaded.items():
        require_given_text(m, f"the {role}")
    calibrated = request.library is not None or request.uses_stored_library
    for role in ("reference",) if calibrated else ("generator", "reference"):
        if role in loaded and loaded[role].identity == loaded["target"].identity:
            raise DocauditError(f"the {role} is the target model itself: give --{role} another model")
    return loaded


def synthetic_controls(request: ControlsRequest) -> ControlsResult:
    """The paired synthetic-control test of each book (``audit.synthetic_controls.controls_audit``)."""
    from docaudit.audit.costs import measuring
    from docaudit.corpus.documents import load_documents
    from docaudit.errors import DocauditError
    from docaudit.outputs import prepare_output
    from docaudit.report.controls import controls_json, controls_rows, write_controls

    r = request
    if r.uses_stored_library and (r.stored_library is None or not Path(r.stored_library).is_file()):
        raise DocauditError("synthetic controls need a null: give --null-library DIR, --reference MODEL, or both")
    if r.out is not None:
        prepare_output(r.out, "controls", r.overwrite, r.inputs())
    reading = recorded(r.reading)
    read = (reading.raw, r.run.progress, reading.skips, reading.normalize_chars)
    with measuring("controls"):  # the work beside loading and passes, for the next estimate
        docs = load_documents(r.books, *read)
        library_docs = None if r.library is None else load_documents(r.library, *read)
        result = _controls_run(r, docs, library_docs, reading)
        if r.out is not None:
            write_controls(result, Path(r.out), r.overwrite)
    return ControlsResult(result, controls_rows(result), envelope_of("controls", controls_json(result), r.run))


def _controls_run(r: ControlsRequest, docs: list, library_docs: list | None, reading) -> dict:
    """The models loaded, the stored library read when it is the null, the books tested: the result with the
    run's records."""
    from docaudit.audit.synthetic_controls import NULL_WORDS, controls_audit
    from docaudit.provenance import document_records, model_record
    from docaudit.query.progress import showing

    loaded = _loaded_models(r)
    if r.uses_stored_library:
        from docaudit.audit.controls_library import null_key, read_library

        library_docs = read_library(r.stored_library, null_key(loaded, r.config, reading), r.config.block)
    with showing(r.run.progress):
        result = controls_audit(docs, library_docs, loaded, r.config, r.run)
    if library_docs is None:
        null = "none (a reference model alone: the contrast is reported, no p-value)"
    else:
        source = f"the stored library {r.stored_library}" if r.uses_stored_library else "the null library"
        null = f"{NULL_WORDS}; rank p-value among {source}'s texts at the book's passage count"
    if r.reference is not None:
        null += ", contrasts net of the reference model's"
    result.update(
        null=null,
        settings=r.config.used(r.run.seed),
        generator=model_record(loaded["generator"]),
        reference=model_record(loaded["reference"]) if "reference" in loaded else None,
        skipped=reading.skips.as_json(),
        inputs=document_records(docs, "judged") + document_records(library_docs or [], "library"),
        model=model_record(loaded["target"]),
    )
    return result


def run_like(target: ModelConfig, model: str | None) -> ModelConfig:
    """``--generator`` or ``--reference`` run as the target is: its device, dtype, ``--backend`` and that backend's
    options (a URL names its own server and model)."""
    from docaudit.query.backends import backend_spec

    keep = {"device", "dtype", "backend", *backend_spec(target.backend).options}
    if model is not None and model.startswith(("http://", "https://")):
        keep -= {"api_base", "api_model"}
    return ModelConfig(model=model, **{k: getattr(target, k) for k in keep})
