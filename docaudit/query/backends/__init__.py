"""Backends: what runs the model for the querier (``base.Backend``), each registered in ``base.BACKENDS`` by its
own module with how it loads a model and what it provides. ``transformers`` loads the model with transformers in
this process; ``llamacpp`` runs a ``.gguf`` file through llama.cpp without dequantizing it; ``openai`` asks an
OpenAI-compatible server. A new backend is one module registering itself, imported below."""

from __future__ import annotations

from typing import TYPE_CHECKING

# each module registers its backend, in the order of --backend's choices
# isort: off
from docaudit.query.backends import transformers  # noqa: F401
from docaudit.query.backends import llamacpp  # noqa: F401
from docaudit.query.backends import openai  # noqa: F401

# isort: on
from docaudit.query.backends.base import BACKENDS, Backend, BackendSpec, backend_spec, provides, require

if TYPE_CHECKING:
    from docaudit.config import QueryConfig
    from docaudit.query.loaded import LoadedModel

__all__ = ["BACKENDS", "Backend", "BackendSpec", "backend_spec", "open_backend", "provides", "require"]


def open_backend(lm: LoadedModel, query: QueryConfig) -> Backend:
    """The backend that queries ``lm`` with windows of ``query.context`` tokens."""
    return backend_spec(lm.config.backend).open(lm, query)
