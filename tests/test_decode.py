"""Sampling continuations (``query.decode``): the sampler's draws against the exact softmax at the temperature, the
decoding loop's two-token sequences against probabilities from full forward passes of a tiny model, and rows that do
not depend on their batch or their neighbours."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency, chisquare

from docaudit.config import ModelConfig
from docaudit.query.decode import Decoder
from docaudit.query.sampling import BLOCK, inverse_cdf


def exact_softmax(logits: torch.Tensor, temperature: float, banned: list[int]) -> np.ndarray:
    """softmax(logits / T) in float64 with the banned ids at 0, renormalized."""
    p = torch.softmax(logits.double() / temperature, dim=-1)
    p[..., banned] = 0.0
    return (p / p.sum(-1, keepdim=True)).numpy()


def chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """Pearson's goodness-of-fit p-value of ``counts`` against ``p`` (cells of probability 0 must be empty)."""
    assert counts[p == 0].sum() == 0
    return chisquare(counts[p > 0], counts.sum() * p[p > 0]).pvalue


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_inverse_cdf_draws_the_softmax_at_the_temperature(temperature):
    """A vocabulary of three blocks (the last one partial), a few heavy tokens in each, two banned ids: 40,000 draws
    fit the exact probabilities, and the same counts reject the softmax at another temperature (the test can
    fail)."""
    vocab = 2 * BLOCK + 276
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(vocab, generator=g)
    logits[[3, BLOCK + 1, 2 * BLOCK + 5, vocab - 1]] += torch.tensor([6.0, 5.0, 5.5, 4.0])
    banned = [BLOCK + 1, 7]
    counts = np.zeros(vocab)
    for _ in range(8):
        u = torch.rand(5000, generator=g, dtype=torch.float64)
        drawn = inverse_cdf(logits.expand(5000, vocab).clone(), u, temperature, torch.tensor(banned))
        counts += np.bincount(drawn.numpy(), minlength=vocab)
    assert chi_square_p(counts, exact_softmax(logits, temperature, banned)) > 1e-3
    assert chisquare(counts, counts.sum() * exact_softmax(logits, temperature + 0.2, [])).pvalue < 1e-6


def test_inverse_cdf_agrees_with_multinomial():
    """The sampler's counts and torch.multinomial's on the same distribution: a two-sample chi-square."""
    vocab = 40
    logits = torch.linspace(-2.0, 2.0, vocab) ** 3
    u = torch.rand(30000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ours = np.bincount(inverse_cdf(logits.expand(30000, vocab).clone(), u, 1.0, torch.tensor([])), minlength=vocab)
    probs = torch.softmax(logits.double(), -1)
    theirs = torch.multinomial(probs, 30000, replacement=True, generator=torch.Generator().manual_seed(2))
    table = np.stack([ours, np.bincount(theirs.numpy(), minlength=vocab)])
    assert chi2_contingency(table[:, table.sum(0) > 0]).pvalue > 1e-3


@pytest.fixture(scope="module")
def peaked_gpt2():
    """A GPT-2 of six tokens with large random weights (next-token distributions far from uniform and from each
    other) and a large bias toward its EOS (id 5), which must never be drawn."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(4)
    config = GPT2Config(vocab_size=6, n_positions=32, n_embd=16, n_layer=2, n_head=2, eos_token_id=5, bos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
        hidden = model.transformer(torch.tensor([[1, 2, 3, 4]])).last_hidden_state[0, -1]
        model.transformer.wte.weight[5] = hidden * (8.0 / hidden.norm() ** 2)  # a logit of 8 after the prompt
    return model


def reference_pairs(model, prompt: list[int], temperature: float) -> np.ndarray:
    """P(a, b | prompt) for every pair of non-EOS tokens, each factor from a full forward pass without a cache."""
    with torch.no_grad():
        first = exact_softmax(model(torch.tensor([prompt])).logits[0, -1], temperature, [5])
        table = np.zeros((6, 6))
        for a in range(5):
            second = exact_softmax(model(torch.tensor([prompt + [a]])).logits[0, -1], temperature, [5])
            table[a] = first[a] * second
    return table


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_decoded_pairs_follow_the_model(peaked_gpt2, temperature):
    """Two tokens after a prompt, 6,000 rows (the prompt's cache repeated for its rows): the 25 pairs' counts fit the
    exact joint probabilities; EOS, the model's likeliest token, never appears; the counts reject the joint of two
    independent tokens with the same marginals (so the test sees a loop that loses the first token)."""
    prompt, rows = [1, 2, 3, 4], 6000
    decoder = Decoder(peaked_gpt2, torch.device("cpu"))
    uniforms = np.random.default_rng(4).random((rows, 2))
    drawn = decoder.sample([prompt], rows, uniforms, temperature)
    assert drawn.shape == (rows, 2) and not (drawn == 5).any()
    counts = np.zeros((6, 6))
    np.add.at(counts, (drawn[:, 0], drawn[:, 1]), 1)
    exact = reference_pairs(peaked_gpt2, prompt, temperature)
    with torch.no_grad():
        eos_first = torch.softmax(peaked_gpt2(torch.tensor([prompt])).logits[0, -1].double() / temperature, -1)[5]
    assert eos_first > 0.5  # EOS would end most rows at once if it could be drawn
    assert chi_square_p(counts.ravel(), exact.ravel()) > 1e-3
    independent = np.outer(exact.sum(1), exact.sum(0)).ravel()
    assert chi_square_p(counts.ravel(), independent) < 1e-6


@pytest.fixture(scope="module")
def gpt2_model(tiny_gpt2):
    from docaudit.query.models import load_model

    return load_model(ModelConfig(model=str(tiny_gpt2)))


def test_rows_do_not_depend_on_the_batch_at_temperature_one(gpt2_model):
    """Each continuation draws from its own stream of uniforms: batches of 1, 2 and 5 prompts give the same rows at
    temperature 1, a prompt's rows are the same beside other prompts, and another seed gives other rows."""
    from docaudit.query.generate import continuations

    prompts = [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    runs = [
        continuations(gpt2_model, prompts, 3, 8, {"temperature": 1.0, "seed": 7, "batch_size": b}) for b in (1, 2, 5)
    ]
    assert runs[0] == runs[1] == runs[2]
    assert [len(r) for rows in runs[0] for r in rows] == [8] * 9
    beside = continuations(
        gpt2_model, [prompts[0], [20, 21, 22, 23]], 3, 8, {"temperature": 1.0, "seed": 7, "batch_size": 2}
    )
    assert beside[0] == runs[0][0]
    other = continuations(gpt2_model, prompts, 3, 8, {"temperature": 1.0, "seed": 8, "batch_size": 2})
    assert other != runs[0]
    assert len({tuple(r) for rows in runs[0] for r in rows}) == 9  # the samples of one prompt differ


def test_pairs_of_tokens_cover_every_cell(peaked_gpt2):
    """The reference table is a distribution over the 25 non-EOS pairs (a check of the reference itself)."""
    exact = reference_pairs(peaked_gpt2, [1, 2, 3, 4], 1.0)
    assert exact.sum() == pytest.approx(1.0) and all(exact[a, b] > 0 for a, b in itertools.product(range(5), repeat=2))
