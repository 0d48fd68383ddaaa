"""A tiny controlled target shared by the lab and uncertainty tests: a GPT-2 trained on a random half of short
excerpts of real books (read by path from the shared corpus, never copied)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np
import torch
from conftest import CORPUS

from docaudit.config import TargetConfig
from docaudit.lab.experiment import split_members
from docaudit.lab.target import train_target

TINY = TargetConfig(
    layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=30, learning_rate=3e-3, batch_size=8
)


def book_excerpt(path: Path, n_words: int = 150) -> str:
    """``n_words`` words from the middle of a book (far from any header or licence text)."""
    words = path.read_text(encoding="utf-8").replace("\r\n", "\n").split(" ")
    mid = len(words) // 2
    return " ".join(words[mid : mid + n_words])


def excerpts(n: int = 24, n_words: int = 150) -> dict[str, str]:
    paths = sorted((CORPUS / "members").glob("*.txt"))[:n]
    return {p.stem: book_excerpt(p, n_words) for p in paths}


class single_thread:
    """Run torch on one thread inside the block (faster for tiny models on a shared machine)."""

    def __enter__(self):
        self.n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.n)


_KEEP: list[tempfile.TemporaryDirectory] = []


@functools.cache
def tiny_target():
    """Train (once per test process) the tiny target; returns (model_dir, member_texts, nonmember_texts)."""
    texts = excerpts()
    split = split_members(list(texts), seed=0)
    members = [texts[i] for i in sorted(texts) if split[i] == 1]
    nonmembers = [texts[i] for i in sorted(texts) if split[i] == 0]
    tmp = tempfile.TemporaryDirectory(prefix="docaudit-tiny-target-")
    _KEEP.append(tmp)
    with single_thread():
        model_dir = train_target(members, list(texts.values()), tmp.name, TINY)
    return model_dir, members, nonmembers


@torch.no_grad()
def mean_logp(
    model, tokenizer, texts, context: int, max_tokens: int | None, bos_per_window: bool = False
) -> np.ndarray:
    """Per-document mean log-probability of the tokens (each predicted once, windows of ``context`` tokens), one
    plain forward pass per window. With ``bos_per_window`` the text is encoded without special tokens and each
    window is run as ``[BOS] + window`` (the querier's layout); otherwise the encoding (BOS included) is cut into
    windows as it is."""
    out = []
    prefix = torch.tensor([tokenizer.bos_token_id] if bos_per_window else [], dtype=torch.long)
    for text in texts:
        ids = torch.tensor(tokenizer(text, add_special_tokens=not bos_per_window).input_ids[:max_tokens])
        total, count = 0.0, 0
        for start in range(0, len(ids) - 1, context - 1):
            window = ids[start : start + context]
            logits = model(input_ids=torch.cat([prefix, window])[None]).logits[0, len(prefix) : -1]
            logp = torch.log_softmax(logits.float(), dim=-1)
            total += float(logp.gather(1, window[1:, None]).sum())
            count += len(window) - 1
        out.append(total / count)
    return np.array(out)
