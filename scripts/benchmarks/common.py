"""Helpers shared by the benchmark scripts (no docaudit imports): resident memory, the CPU's name, documents."""

from __future__ import annotations

import os
import platform
import resource
import sys
import time
from pathlib import Path

# the shared corpus of books beside the repository, or $DOCAUDIT_CORPUS (as the tests)
CORPUS = Path(os.environ.get("DOCAUDIT_CORPUS") or Path(__file__).resolve().parents[3] / "shared" / "corpus")


# ----------------------------------------------------------------------------------------------- memory
def rss_mb() -> float:
    """Current resident set size (MB)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import psutil

        return psutil.Process().memory_info().rss / 2**20


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak resident set size since the last reset (VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


# ----------------------------------------------------------------------------------------------- documents
def default_documents() -> list[Path]:
    books = sorted((CORPUS / "members").glob("*.txt"))
    if not books:
        raise SystemExit(f"no documents: pass paths with --docs (the default corpus {CORPUS} is absent)")
    return books


def read_documents(paths: list[Path], chars_needed: int) -> list[str]:
    """Cleaned texts of the documents, in order, until about ``chars_needed`` characters are collected."""
    from docaudit.corpus.documents import load_document

    texts, total = [], 0
    for p in paths:
        texts.append(load_document(p).text)
        total += len(texts[-1])
        if total >= chars_needed:
            break
    return texts


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tiny_llama(
    folder: Path, texts: list[str], vocab: int, hidden: int, intermediate: int, kv_heads: int, positions: int
) -> Path:
    """A small Llama built from its config (4 layers, 4 heads, random weights seeded 0) with a BPE tokenizer of
    ``vocab`` tokens trained on ``texts``, saved to ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from docaudit.lab.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab, special="<s>", add_bos=True, pad=False)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(fn, *args):
    """``fn(*args)``, the CPU seconds and the wall seconds it took."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.process_time() - cpu, time.perf_counter() - wall
