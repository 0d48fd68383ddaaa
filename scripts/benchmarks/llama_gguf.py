"""Llama-shaped benchmark models that need no download: random weights written as a float32 GGUF with the ``gguf``
package, then quantized to Q4_K_M by llama.cpp's own quantizer (``llama_cpp.llama_model_quantize``). Built once
into a cache directory (a finished file is renamed into place, so an interrupted build leaves nothing behind)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Shape:
    """A Llama architecture's shape (rope dimension = hidden / heads)."""

    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    context: int = 4096

    @property
    def params(self) -> int:
        h, kv = self.hidden, self.hidden // self.heads * self.kv_heads
        per_layer = 2 * h * h + 2 * h * kv + 3 * h * self.ffn + 2 * h
        return 2 * self.vocab * h + self.layers * per_layer + h


PRESETS = {
    # Llama-3.2-1B's trunk (16 layers, hidden 2048, MLP 8192, 32 heads, 8 K/V heads) with a 32,000-token vocabulary
    "llama-1b": Shape(hidden=2048, layers=16, ffn=8192, heads=32, kv_heads=8, vocab=32000),
    # Llama-3.2-3B's trunk (28 layers, hidden 3072, MLP 8192, 24 heads, 8 K/V heads), same vocabulary
    "llama-3b": Shape(hidden=3072, layers=28, ffn=8192, heads=24, kv_heads=8, vocab=32000),
    # for the tests: rows of 256 (Q4_K's block), two layers
    "llama-tiny": Shape(hidden=256, layers=2, ffn=512, heads=4, kv_heads=2, vocab=1024, context=512),
}


def _tokenizer_tables(texts: list[str], vocab: int) -> tuple[list[str], list[str], list[int]]:
    """Tokens, merges and token types of a byte-level BPE trained on ``texts`` (token 0 ``<s>``, the BOS),
    padded with unused tokens to ``vocab``."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from docaudit.lab.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab, special="<s>", add_bos=True, pad=False)
    bpe = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    tokens = sorted(bpe["vocab"], key=bpe["vocab"].get)[:vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe["merges"]]
    types = [3] + [1] * (len(tokens) - 1)  # <s> is a control token
    pad = vocab - len(tokens)
    return tokens + [f"<unused{i}>" for i in range(pad)], merges, types + [5] * pad


def _tensors(shape: Shape):
    """``(name, gguf shape as numpy shape)`` of every tensor, in llama.cpp's naming."""
    h, kv = shape.hidden, shape.hidden // shape.heads * shape.kv_heads
    yield "token_embd.weight", (shape.vocab, h)
    for i in range(shape.layers):
        yield f"blk.{i}.attn_norm.weight", (h,)
        yield f"blk.{i}.attn_q.weight", (h, h)
        yield f"blk.{i}.attn_k.weight", (kv, h)
        yield f"blk.{i}.attn_v.weight", (kv, h)
        yield f"blk.{i}.attn_output.weight", (h, h)
        yield f"blk.{i}.ffn_norm.weight", (h,)
        yield f"blk.{i}.ffn_gate.weight", (shape.ffn, h)
        yield f"blk.{i}.ffn_up.weight", (shape.ffn, h)
        yield f"blk.{i}.ffn_down.weight", (h, shape.ffn)
    yield "output_norm.weight", (h,)
    yield "output.weight", (shape.vocab, h)


def write_f32_gguf(path: Path, shape: Shape, texts: list[str], seed: int = 0) -> None:
    """A float32 GGUF of a Llama of ``shape`` with random weights (normal, std 0.02; norms 1), streamed tensor by
    tensor (memory: one tensor at a time), and a BPE tokenizer trained on ``texts``."""
    import gguf

    tokens, merges, types = _tokenizer_tables(texts, shape.vocab)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"random llama {shape.hidden}x{shape.layers}")
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(shape.hidden // shape.heads)
    writer.add_vocab_size(shape.vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_add_bos_token(True)
    specs = list(_tensors(shape))
    for name, dims in specs:
        writer.add_tensor_info(name, dims, np.dtype(np.float32), int(np.prod(dims)) * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for _, dims in specs:
        if len(dims) == 1:
            data = np.ones(dims, dtype=np.float32)
        else:
            data = rng.standard_normal(dims, dtype=np.float32)
            data *= 0.02
        writer.write_tensor_data(data)
    writer.close()


def quantize_q4_k_m(src: Path, dst: Path, threads: int | None = None) -> None:
    """llama.cpp's own quantizer: ``src`` (float32 GGUF) to Q4_K_M."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = threads or os.cpu_count() or 1
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not quantize {src}")


def build(preset: str, cache: Path, texts: list[str]) -> dict[str, Path]:
    """The preset's float32 and Q4_K_M GGUF files under ``cache/bench-models``, built when absent. The float32
    file is deleted once quantized (the transformers variant dequantizes the Q4_K_M file instead)."""
    shape = PRESETS[preset]
    folder = cache / "bench-models"
    folder.mkdir(parents=True, exist_ok=True)
    q4 = folder / f"{preset}-Q4_K_M.gguf"
    if not q4.exists():
        f32 = folder / f"{preset}-f32.gguf.part"
        part = folder / f"{preset}-Q4_K_M.gguf.part"
        try:
            write_f32_gguf(f32, shape, texts)
            quantize_q4_k_m(f32, part)
            part.rename(q4)
        finally:
            f32.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
    return {"q4_k_m": q4}
