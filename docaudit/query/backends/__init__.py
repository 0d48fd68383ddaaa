"""Backends: what runs the model for the querier (``base.Backend``). ``transformers`` loads the model with
transformers in this process; ``llamacpp`` runs a ``.gguf`` file through llama.cpp without dequantizing it;
``openai`` asks an OpenAI-compatible server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from docaudit.query.backends.base import BACKENDS, Backend, provides, require

if TYPE_CHECKING:
    from docaudit.config import QueryConfig
    from docaudit.query.models import LoadedModel

__all__ = ["BACKENDS", "Backend", "open_backend", "provides", "require"]


def open_backend(lm: LoadedModel, query: QueryConfig) -> Backend:
    """The backend that queries ``lm`` with windows of ``query.context`` tokens."""
    name = lm.config.backend
    if name == "llamacpp":
        from docaudit.query.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(lm.model, query.context)
    if name == "openai":
        from docaudit.query.backends.openai import OpenAIBackend

        return OpenAIBackend(lm.model, lm.tokenizer, lm.vocab_size)
    from docaudit.query.backends.transformers import TransformersBackend

    return TransformersBackend(lm.model, lm.vocab_size, lm.device)
