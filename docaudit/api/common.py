"""What every command of the API shares: the Ray pool around a run, the skip record of a run's documents, the
inputs an output folder must not hold, and :class:`Result`, the base of every command's result (its JSON
envelope, its rows as a pandas frame)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from docaudit.config import ModelConfig
from docaudit.corpus.base import Skips
from docaudit.query.distributed import scale_out
from docaudit.query.loaded import LoadedModel
from docaudit.query.progress import showing
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext

if TYPE_CHECKING:
    import pandas as pd


@contextmanager
def scaled(run: RunContext) -> Iterator[RunContext]:
    """``run`` with its Ray pool for the block: ``run.pool`` when given, else one opened from ``run.ray`` (started
    or joined at the first query, stopped at the end), else none; the queries made within the block go to it, and
    show progress (model loading included) only with ``run.progress``."""
    if run.pool is not None:
        with run.pool.joblib_backend(), showing(run.progress):
            yield run
        return
    with scale_out(run.ray) as pool, showing(run.progress):
        yield run.with_pool(pool)


def recorded(reading: DocumentSpec) -> DocumentSpec:
    """``reading`` with the record of the documents a run leaves out: its own ``skips``, else a new one (an error
    at the first such document with ``reading.strict``)."""
    return reading if reading.skips is not None else replace(reading, skips=Skips(reading.strict))


def skipped_rows(reading: DocumentSpec) -> list[dict]:
    """One row per document left out (``file``, ``skipped``: the reason), after the rows of the documents judged."""
    return [{"file": s["file"], "skipped": s["reason"]} for s in reading.skips.as_json()]


def local_inputs(groups: Sequence[object]) -> list:
    """Every local path among ``groups`` (path lists, single paths, model configs; None and loaded models
    skipped): what an output folder must not be or contain."""
    paths = []
    for group in groups:
        if isinstance(group, ModelConfig):
            group = group.model
        if group is None or isinstance(group, LoadedModel):
            continue
        paths += [group] if isinstance(group, (str, os.PathLike)) else list(group)
    return paths


def model_inputs(models: ModelSpec, detectors: DetectorSpec | None = None) -> tuple:
    """The inputs a command names beside its documents: its models and the documents calibrating DC-PDD."""
    return models.model, models.ref_model, models.neighbor_model, None if detectors is None else detectors.freq_corpus


def envelope_of(schema: str, body: object, run: RunContext | None = None) -> dict:
    """The JSON output of kind ``schema`` around ``body`` (``provenance.envelope``), with the command line of
    ``run`` (None: this process's own)."""
    from docaudit.provenance import envelope

    return envelope(schema, body, command=None if run is None else run.command)


class Result:
    """What every command returns: ``envelope``, its JSON output as the command line prints it
    (``provenance.envelope``: schema, version, command, time, inputs, model, environment, seed, then the results),
    and its rows as the command line prints them as CSV (:meth:`to_frame`, from ``rows`` unless a result overrides
    it)."""

    schema: ClassVar[str]
    envelope: dict
    rows: list[dict]

    def to_json(self) -> dict:
        """The JSON output (``docaudit/schemas/<schema>.schema.json``), envelope included."""
        return self.envelope

    def to_frame(self) -> pd.DataFrame:
        """The rows ``--format csv`` prints, as a pandas frame (from the result's ``rows``)."""
        import pandas as pd

        return pd.DataFrame(self.rows)
