"""Typed run objects: the groups of settings that travel together from the API through the audits, passed
explicitly rather than kept in module state.

- :class:`DocumentSpec`: how documents are read (cleaned or ``raw``, ``normalize_chars``), whether a text in both
  sets is dropped, and where the documents left out are recorded (``skips``);
- :class:`ModelSpec`: the target model and the extra models some detectors query (``ref_model``,
  ``neighbor_model``); how they are queried stays in :class:`docaudit.config.QueryConfig`;
- :class:`DetectorSpec`: which detectors score and how (``methods``, :class:`docaudit.config.DetectorConfig`, the
  documents that calibrate DC-PDD's token frequencies);
- :class:`RunContext`: the seed, progress bars, the command line being run (written into provenance) and the
  optional Ray settings with the pool opened from them.

The requests of :mod:`docaudit.api` hold them as typed fields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from docaudit.config import MAX_SEED, SEED, DetectorConfig, ModelConfig, RayConfig
from docaudit.config.base import check_count


@dataclass(frozen=True)
class DocumentSpec:
    """How the documents of a run are read: cleaned (boilerplate removed) unless ``raw``; typographic characters,
    emphasis markup and whitespace normalized with ``normalize_chars``; a text in both sets an error unless
    ``drop_duplicates`` leaves it out of both. ``skips`` (a :class:`docaudit.corpus.documents.Skips`, None: a new
    one per call, an error at the first document that cannot be used with ``strict``) records the documents left
    out."""

    raw: bool = False
    normalize_chars: bool = False
    drop_duplicates: bool = False
    skips: Any = None
    strict: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """The model under audit (a :class:`docaudit.config.ModelConfig`, or a model already loaded) and the extra
    models that some detectors query: ``ref_model`` for the reference-model detector, ``neighbor_model`` (a
    masked language model) for the neighbourhood detector."""

    model: Any = field(default_factory=ModelConfig)
    ref_model: Any = None
    neighbor_model: Any = None


@dataclass(frozen=True)
class DetectorSpec:
    """The detectors that score (``methods``: names or a comma-separated string; None: the default ones), their
    settings, and ``freq_corpus``: documents whose token frequencies calibrate DC-PDD (None: the audited
    documents' own texts, without labels)."""

    methods: Sequence[str] | str | None = None
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    freq_corpus: Any = None


@dataclass(frozen=True)
class RunContext:
    """What a run carries besides its inputs: ``seed``, ``progress`` bars, the ``command`` line being run (as
    written into an output's provenance; None: this process's own) and ``ray`` (queries on Ray workers,
    docs/scaling.md). ``pool`` is the Ray pool opened from ``ray`` for the run (by the API), passed down to where
    the documents are queried."""

    seed: int = SEED
    progress: bool = False
    command: tuple[str, ...] | None = None
    ray: RayConfig | None = None
    pool: Any = None

    def __post_init__(self):
        check_count("--seed", self.seed, 0, MAX_SEED)
        if self.command is not None:
            object.__setattr__(self, "command", tuple(str(a) for a in self.command))

    def with_pool(self, pool) -> RunContext:
        """This context with the Ray ``pool`` opened for it."""
        return replace(self, pool=pool)
