"""A loaded model: what its backend runs, its tokenizer, and the identity that keys caches and classifiers.

A backend may defer its weights (:class:`Deferred`): the identity, tokenizer and the sizes the querier needs are
known from the model's files, so a run whose statistics are all cached never loads them; the first access to
``LoadedModel.model`` does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from docaudit.config import ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.query.lazy import torch

CGROUP = Path("/sys/fs/cgroup")  # this process's cgroup (v2), where a container's memory limit shows

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Deferred:
    """Weights not loaded yet: ``load()`` loads them (once, on first use); the output dimension and the longest
    input, read from the model's configuration without them."""

    load: Callable[[], object]
    vocab_size: int
    max_positions: int | None


@dataclass
class LoadedModel:
    """A causal LM ready for querying, with the identity that keys caches and classifiers. ``model`` is what the
    configured backend runs: a torch module (transformers), a ``GGUFModel`` (llamacpp) or an ``ApiClient``
    (openai), each with its ``vocab_size`` and ``max_positions``; given as a :class:`Deferred`, it is loaded on
    first access (``loaded`` says whether it has been). ``opened``: the backend opened on it for scoring given
    suffixes and sampling (``models.opened_backend``), kept for the run."""

    model: object = field(repr=False, compare=False)
    tokenizer: object
    identity: str
    tokenizer_hash: str
    config: ModelConfig
    device: torch.device
    opened: dict = field(default_factory=dict, repr=False, compare=False)  # backends opened outside a querier

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (not a :class:`Deferred` still)."""
        return not isinstance(self.__dict__["model"], Deferred)

    @property
    def pending(self) -> Deferred | None:
        """The :class:`Deferred` weights, or None once loaded (or never deferred)."""
        held = self.__dict__["model"]
        return held if isinstance(held, Deferred) else None

    @property
    def vocab_size(self) -> int:
        """The model's output dimension (may differ from ``len(tokenizer)``)."""
        if self.pending is not None:
            return self.pending.vocab_size
        if isinstance(self.model, torch.nn.Module):
            return int(self.model.get_output_embeddings().weight.shape[0])
        return self.model.vocab_size

    @property
    def max_positions(self) -> int | None:
        """The longest input the model accepts, when known."""
        if self.pending is not None:
            return self.pending.max_positions
        if isinstance(self.model, torch.nn.Module):
            config = self.model.config
            return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        return self.model.max_positions

    @property
    def precision(self) -> str:
        """The quantization, or else the dtype, the model was loaded with (:func:`precision_of`)."""
        return precision_of(self.config)

    def cache_identity(self) -> dict:
        """What identifies the model's statistics in the cache: its content, its precision and its tokenizer (and
        what the backend adds, e.g. the server: ``Querier.key``)."""
        return {"model": self.identity, "precision": self.precision, "tokenizer": self.tokenizer_hash}


def precision_of(config: ModelConfig) -> str:
    """The quantization, or else the dtype, a model is loaded with under ``config`` (known before loading it): the
    backend's name for llamacpp (a GGUF file's own) and openai (the server's)."""
    if config.backend != "transformers":
        return config.backend
    return config.quantize or config.dtype


def _model(lm: LoadedModel) -> object:
    held = lm.__dict__["model"]
    if isinstance(held, Deferred):
        held = lm.__dict__["model"] = held.load()
    return held


def _set_model(lm: LoadedModel, value: object) -> None:
    lm.__dict__["model"] = value


LoadedModel.model = property(_model, _set_model, doc="What the backend runs, loaded here on first access.")


def tokenizer_hash(tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of the tokenizer's full definition (vocabulary, merges, special tokens, BOS handling)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    text += json.dumps([tokenizer.bos_token, tokenizer.eos_token, tokenizer("a").input_ids])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_device(device: str) -> torch.device:
    """``--device`` as a torch device: ``auto`` is a CUDA GPU when there is one, else the CPU; an unknown device or
    a missing GPU is a one-line error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as e:
        raise DocauditError(f"unknown device '{device}'") from e
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ModelError("device 'cuda' requested but no CUDA GPU is available")
    return resolved


def available_memory(device) -> int:
    """Bytes a computation on ``device`` may still allocate: a GPU's free memory; on the CPU the least of the
    memory the system has available, the room left under this process's cgroup limit and under its address-space
    limit (``ulimit -v``), so a run in a container or under a limit sizes its work to it."""
    import resource

    import psutil

    from docaudit.untrusted import read_untrusted_text

    if getattr(device, "type", str(device)) == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    room = [psutil.virtual_memory().available]
    try:
        limit = read_untrusted_text(CGROUP / "memory.max", "kernel value").strip()
        if limit != "max":
            room.append(int(limit) - int(read_untrusted_text(CGROUP / "memory.current", "kernel value")))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        room.append(soft - psutil.Process().memory_info().vms)
    return max(0, min(room))
