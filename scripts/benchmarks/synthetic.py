"""Llama-architecture benchmark models built from a config with random weights (no download), as docaudit
LoadedModels: a small one for quick runs and tests, and Llama-2-7B's shape for a GPU. Also what the benchmarks
need to know about a loaded torch model (its resident footprint, its parameters used in matrix products)."""

from __future__ import annotations

import atexit
import gc
import shutil
import tempfile
from pathlib import Path

import torch

from docaudit.config import ModelConfig
from docaudit.query.models import LoadedModel, load_model, resolve_device


def _tokenizer(texts: list[str], vocab_size: int, add_bos: bool = True):
    from docaudit.lab.tokenizer import train_tokenizer

    return train_tokenizer(texts, vocab_size, special="<s>", add_bos=add_bos, pad=False)


def synthetic_config(kind: str, vocab_size: int):
    from transformers import LlamaConfig

    if kind == "tiny":  # a small Llama: 4 layers, hidden 128, vocabulary 8192
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=128,
            intermediate_size=384,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            bos_token_id=0,
            eos_token_id=0,
            tie_word_embeddings=False,
        )
    # Llama-2-7B's shape: 32 layers, hidden 4096, MLP 11008, 32 heads, vocabulary 32000 (6.74 B parameters)
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )


def _random_model(config, dtype: torch.dtype, device: torch.device):
    """``LlamaForCausalLM(config)`` with its weights created directly in ``dtype`` on ``device``."""
    from transformers import LlamaForCausalLM

    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)


def _kind(kind: str, texts: list[str]):
    """The tokenizer (trained on ``texts``, at most 8,192 entries) and the config of the model ``kind``."""
    vocab = 8192 if kind == "tiny" else 32000
    return _tokenizer(texts, min(vocab, 8192)), synthetic_config(kind, vocab)


def save_synthetic(kind: str, texts: list[str], folder: Path, dtype: str = "float32", device: str = "cpu") -> Path:
    """The random-weight model ``kind`` (seeded 0) and its tokenizer saved to ``folder`` in ``dtype``, for
    docaudit's own loader (bitsandbytes quantizes at load time; other precisions load the same weights)."""
    tokenizer, config = _kind(kind, texts)
    torch.manual_seed(0)
    model = _random_model(config, getattr(torch, dtype), resolve_device(device))
    model.config.dtype = dtype
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    gc.collect()
    return folder


def build_synthetic(kind: str, texts: list[str], args) -> LoadedModel:
    """A randomly initialised Llama-architecture model built from its config, with a tokenizer trained on the
    benchmark documents. Quantized variants go through a saved directory and docaudit's own loader."""
    name = "tiny-llama (random weights)" if kind == "tiny" else "llama-7b-shaped (random weights)"
    if args.quantize:
        tmp = Path(tempfile.mkdtemp(prefix="docaudit-bench-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        save_synthetic(kind, texts, tmp, args.dtype, args.device)
        lm = load_model(ModelConfig(model=str(tmp), dtype=args.dtype, device=args.device, quantize=args.quantize))
        lm.identity = f"{name}, {args.quantize}"
        return lm
    tokenizer, config = _kind(kind, texts)
    torch.manual_seed(0)
    device = resolve_device(args.device)
    model = _random_model(config, getattr(torch, args.dtype), device)
    model.eval()
    cfg = ModelConfig(model=name, dtype=args.dtype, device=args.device)
    return LoadedModel(model, tokenizer, name, "synthetic", cfg, device)


@torch.inference_mode()
def touch_parameters(model) -> None:
    """Read one element per 4 KB page of every parameter and buffer, so that weights loaded lazily (memory-mapped
    safetensors) are resident: the model's footprint is then the resident size after loading."""
    for t in [*model.parameters(), *model.buffers()]:
        if t.device.type == "cpu" and t.numel():
            flat = t.detach().reshape(-1)
            step = max(1, 4096 // t.element_size())
            flat[::step].float().sum().item()


def matmul_params(model) -> int:
    """Parameters used in matrix products per token: all of them, less an input embedding that is not shared
    with the output layer (a lookup, not a product)."""
    total = sum(p.numel() for p in model.parameters())
    emb, out = model.get_input_embeddings(), model.get_output_embeddings()
    if emb is not None and (out is None or emb.weight.data_ptr() != out.weight.data_ptr()):
        total -= emb.weight.numel()
    return total
