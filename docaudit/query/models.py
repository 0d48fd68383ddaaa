"""Loading a target model through its backend (``docaudit.query.backends``: each registers how it loads one), and
what the rest of the package asks of a model's backend before querying it.

Where a model comes from and its identity are in :mod:`docaudit.query.sources`; the loaded model in
:mod:`docaudit.query.loaded` (both names are importable from here as well)."""

from __future__ import annotations

import time
from dataclasses import fields, replace

from docaudit.config import ModelConfig
from docaudit.errors import DocauditError
from docaudit.query import rates
from docaudit.query.backends import BACKENDS, backend_spec, provides
from docaudit.query.loaded import LoadedModel, resolve_device, tokenizer_hash
from docaudit.query.progress import loading_step
from docaudit.query.sources import (
    EMBEDDED_NAME,
    ModelSource,
    check_identity,
    embedded_gguf,
    looks_like_path,
    resolve_source,
    same_model,
    weights_hash,
)

__all__ = [
    "EMBEDDED_NAME",
    "LoadedModel",
    "ModelSource",
    "backend_name",
    "check_identity",
    "check_options",
    "embedded_gguf",
    "load_model",
    "looks_like_path",
    "opened_backend",
    "resolve_device",
    "resolve_source",
    "same_model",
    "served_query",
    "tokenizer_hash",
    "weights_hash",
]


def load_model(config: ModelConfig, expected_identity: str | None = None) -> LoadedModel:
    """Load the model and tokenizer described by ``config`` through its backend (clear errors for unknown ids,
    backends and bad options).

    With ``expected_identity`` (a classifier's model), a model whose content differs is refused before any of its
    weights are loaded. Model code from the hub runs only with ``config.trust_remote_code``. The returned config
    names the model by a resolvable reference (absolute path; hub commit).

    A backend may defer the weights (``LoadedModel.pending``) to the first model pass: a run whose statistics
    are all cached never loads them. The load time kept for estimates is the whole of it, deferred part included,
    a first use's conversion of the model file left out."""
    check_options(config)
    name = config.model or "(the embedded model)"
    start = time.perf_counter()
    with loading_step(name), rates.loading() as once:
        lm = backend_spec(config.backend).load(config, expected_identity)
    before = time.perf_counter() - start - once["seconds"]
    pending = lm.pending
    if pending is None:
        rates.record_load(config, before, once["seconds"])
        return lm

    def load() -> object:
        start = time.perf_counter()
        with loading_step(f"{name} weights"), rates.loading() as later:
            model = pending.load()
        rates.record_load(
            config, before + time.perf_counter() - start - later["seconds"], once["seconds"] + later["seconds"]
        )
        return model

    lm.model = replace(pending, load=load)
    return lm


def check_options(config: ModelConfig) -> None:
    """Refuse, in one line, a setting given away from its default that only another backend reads (``--kv-cache``
    for a model run by transformers, ``--quantize`` for a llama.cpp file): silently ignored, it would make the run
    look configured as it is not."""
    own = set(backend_spec(config.backend).options)
    defaults = {f.name: f.default for f in fields(ModelConfig)}
    for spec in BACKENDS.values():
        for option in spec.options:
            if option not in own and getattr(config, option) != defaults[option]:
                raise DocauditError(
                    f"--{option.replace('_', '-')} is a setting of the {spec.name} backend, and this model runs "
                    f"through {config.backend}: drop it, or give --backend {spec.name}"
                )


def backend_name(model: ModelConfig | LoadedModel) -> str:
    """The backend a model is (to be) queried through."""
    return (model.config if isinstance(model, LoadedModel) else model).backend


def served_query(query, model: ModelConfig | LoadedModel):
    """``query`` without GP sums when the model's backend cannot compute them (nothing that needs them runs:
    ``docaudit.methods.meta.normalize.served_norms``)."""
    if query.gp and "gp" not in provides(backend_name(model)):
        return replace(query, gp=False)
    return query


def opened_backend(lm: LoadedModel, positions: int):
    """``lm``'s backend opened outside a querier for inputs of up to ``positions`` tokens (a BOS included), to score
    given suffixes or sample continuations through the backend's own machinery; kept on the model
    (``LoadedModel.opened``), so a run opens it once (with a quarter more room), and again larger only when a
    longer input comes."""
    from docaudit.config import QueryConfig

    held = lm.opened.get("backend")
    if held is None or held[0] < positions:
        size = max(positions + positions // 4, 2, held[0] if held else 0)  # room for somewhat longer inputs
        if lm.max_positions is not None:
            size = max(positions, min(size, lm.max_positions))
        backend = backend_spec(lm.config.backend).open(lm, QueryConfig(context=max(2, size - 1), gp=False))
        lm.opened["backend"] = held = (size, backend)
    return held[1]
