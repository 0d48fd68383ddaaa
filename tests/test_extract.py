"""``extract``: p_z as the authors compute it (their ``compute_logprob_batch``, tests/reference_extraction.py) on
the same examples through tiny models, and the summaries built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import corpus_ids, corpus_text
from reference_extraction import CONFIGS, apply_temperature_and_topk, compute_logprob_batch

from docaudit.config import ModelConfig
from docaudit.query.extraction import example_starts, position_logp, pz
from docaudit.query.models import load_model
from docaudit.query.stats import bos_per_window

PREFIX, SUFFIX = 50, 50


def _continue(model, context: list[int], k: int, generator: torch.Generator) -> list[int]:
    """``SUFFIX`` tokens after ``context``, each the argmax (k = 1) or drawn from the top-k softmax."""
    ids = list(context)
    for _ in range(SUFFIX):
        logits = model(torch.tensor([ids])).logits[0, -1]
        if k == 1:
            ids.append(int(logits.argmax()))
        else:
            top = torch.topk(logits, k)
            ids.append(int(top.indices[torch.multinomial(top.values.softmax(0), 1, generator=generator)]))
    return ids[len(context) :]


def _book(lm) -> np.ndarray:
    """A real text's ids in which the suffix of the example at 0 is the model's greedy continuation of its prefix
    and that of the example at 200 a top-40 sample of its prefix's continuation: one greedy-extractable example, one
    only discoverable under sampling, the rest the real text."""
    text = " ".join(corpus_text("members", b, n_chars=3000) for b in corpus_ids("members", 2))
    ids = np.asarray(lm.tokenizer(text, add_special_tokens=False).input_ids[:420], dtype=np.int64)
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for start, k in ((0, 1), (200, 40)):
            ids[start + PREFIX : start + PREFIX + SUFFIX] = _continue(
                lm.model, head + ids[start : start + PREFIX].tolist(), k, g
            )
    return ids


def _reference(lm, ids: np.ndarray, starts: np.ndarray, temperature: float, k: int) -> np.ndarray:
    """The authors' log p_z of each example: their function on the model's logits, taken to float64 (their own
    float32 log-softmax is off by about 1e-6 over 50 tokens, the tolerance asked)."""
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    rows = torch.tensor([head + ids[s : s + PREFIX + SUFFIX].tolist() for s in starts])
    with torch.inference_mode():
        logits = lm.model(input_ids=rows).logits.double()
    inputs = {"input_ids": rows, "attention_mask": torch.ones_like(rows)}
    logp, _ = compute_logprob_batch(inputs, logits, [rows.shape[1] - SUFFIX] * len(rows), temperature, k)
    return np.array(logp)


def _agree(mine: np.ndarray, theirs: np.ndarray) -> None:
    assert np.array_equal(np.isneginf(mine), np.isneginf(theirs)), (mine, theirs)
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(mine[finite], theirs[finite], rtol=0, atol=1e-6)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_pz_agrees_with_the_authors_code(arch, request):
    lm = load_model(ModelConfig(model=str(request.getfixturevalue(f"tiny_{arch}")), device="cpu"))
    ids = _book(lm)
    starts = example_starts(len(ids), PREFIX + SUFFIX, 10)
    [greedy_config, top_config] = CONFIGS
    mine = pz(lm, ids, starts, PREFIX, SUFFIX, (top_config["k"], top_config["temperature"], 7))
    greedy = _reference(lm, ids, starts, greedy_config["temperature"], greedy_config["k"])
    sampled = _reference(lm, ids, starts, top_config["temperature"], top_config["k"])
    _agree(mine.greedy, greedy)
    _agree(mine.sampled, sampled)
    # the constructed examples: greedy p_z 1 at 0, a finite top-40 p_z at 200 and not greedy there
    assert mine.greedy[0] == 0.0 and np.isfinite(mine.sampled[0])
    assert np.isfinite(mine.sampled[20]) and np.isneginf(mine.greedy[20])
    assert np.isneginf(mine.sampled).sum() > len(starts) // 2  # the real text is rarely in a random model's top 40
    # another temperature and k
    hot = pz(lm, ids, starts, PREFIX, SUFFIX, (5, 0.7, 16))
    _agree(hot.sampled, _reference(lm, ids, starts, 0.7, 5))


@pytest.mark.parametrize(("k", "temperature"), [(1, 1.0), (3, 1.0), (4, 0.5), (40, 1.3)])
def test_ties_and_temperature_follow_the_authors_code(k, temperature):
    """Integer logits tie often: the tokens tied with the k-th are all kept, each sharing the probability."""
    g = torch.Generator().manual_seed(k)
    logits = torch.randint(-3, 3, (6, 12, 50), generator=g).float()
    ids = torch.randint(0, 50, (6, 12), generator=g)
    ids[0, 1:] = logits[0, :-1].argmax(1)  # one row whose every token is an argmax
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    theirs = np.array(compute_logprob_batch(inputs, logits, [6] * 6, temperature, k)[0])
    z = logits[:, 5:11].reshape(-1, 50)
    greedy, sampled = position_logp(z, ids[:, 6:12].reshape(-1), k, temperature)
    mine = (greedy if k == 1 else sampled).view(6, 6).sum(1).numpy()
    _agree(mine, theirs)
    if k == 1:  # greedy p_z is 1/m per position where the token ties with m - 1 others
        ties = (logits[0, 5:11] == logits[0, 5:11].max(1, keepdim=True).values).sum(1)
        assert mine[0] == pytest.approx(-float(torch.log(ties.double()).sum()))


def test_the_reference_masks_as_documented():
    """The port itself: top-k keeps the logits tied with the k-th, and drops the rest to -inf."""
    z = torch.tensor([[[3.0, 1.0, 1.0, 0.0]]])
    kept = apply_temperature_and_topk(z, 1.0, 2)
    assert torch.isinf(kept[0, 0, 3]) and not torch.isinf(kept[0, 0, 2])
    assert math.isclose(
        float(torch.log_softmax(kept, -1)[0, 0, 1]), 1.0 - math.log(math.exp(3) + 2 * math.e), rel_tol=1e-6
    )
