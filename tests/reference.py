"""Slow, independent reference computations that the fast code is checked against."""

from __future__ import annotations

import numpy as np
import torch


def naive_token_stats(model, ids, context: int, stride: int, bos: int | None = None):
    """Reference-implementation style: one window at a time, the full softmax on the host in float64, a Python
    loop over tokens. Windows start at 0, S, 2S, ... and each token is scored by the first window that holds it
    with at least one token of context before it; ``bos`` is put before every window."""
    n = len(ids)
    out = {k: [] for k in ("logp", "max_logp", "mu", "sigma")}
    gp = None
    scored_until = 1
    start = 0
    while True:
        end = min(start + context, n)
        with torch.no_grad():
            prefix = [] if bos is None else [bos]
            logits = model(torch.tensor([prefix + ids[start:end]], dtype=torch.long)).logits[0].double().numpy()
            logits = logits[len(prefix) :]
        for t in range(max(scored_until, start + 1), end):
            z = logits[t - 1 - start]
            logp_all = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
            p = np.exp(logp_all)
            mu = float((p * logp_all).sum())
            out["logp"].append(logp_all[ids[t]])
            out["max_logp"].append(logp_all.max())
            out["mu"].append(mu)
            out["sigma"].append(np.sqrt((p * (logp_all - mu) ** 2).sum()))
            gp = p.copy() if gp is None else gp + p
        scored_until = max(scored_until, end)
        if end >= n:
            break
        start += stride
    return {k: np.array(v) for k, v in out.items()}, gp


# ---------------------------------------------------------------------------------------------------------------
# sequence-level scores, computed directly from the model's logits (one forward pass over the whole sequence)


def token_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def full_softmax_rows(model, ids, bos: int | None = None):
    """Per scored token t >= 1 (predicting ids[t] from ids[:t], with ``bos`` in front when given): the full
    log-softmax over the vocabulary in float64, one row per token, and the true token's id."""
    prefix = [] if bos is None else [bos]
    with torch.no_grad():
        logits = model(torch.tensor([prefix + list(ids)])).logits[0].double()
    logits = logits[len(prefix) :]
    return [(torch.log_softmax(logits[t - 1], -1).numpy(), ids[t]) for t in range(1, len(ids))]


def loss_by_labels(model, ids) -> float:
    """The Hugging Face loss: mean cross-entropy over ids[1:] (models without a BOS)."""
    with torch.no_grad():
        return float(model(torch.tensor([list(ids)]), labels=torch.tensor([list(ids)])).loss)


def loss_with_bos(model, ids, bos) -> float:
    """Mean cross-entropy over ids[1:] with ``bos`` put in front (the first text token is context only)."""
    return -float(np.mean([row[y] for row, y in full_softmax_rows(model, ids, bos)]))


def lowest(values, share):
    values = sorted(values)
    return float(np.mean(values[: max(1, int(share * len(values)))]))


def mink_prob(model, ids, share=0.2, bos=None):
    return lowest([row[y] for row, y in full_softmax_rows(model, ids, bos)], share)


def mink_plus_plus(model, ids, share=0.2, bos=None):
    """Per token: (log p(y) - E_p[log p]) / std_p[log p] from the full softmax, in a Python loop."""
    values = []
    for row, y in full_softmax_rows(model, ids, bos):
        p = np.exp(row)
        mu = sum(pi * li for pi, li in zip(p, row))
        var = sum(pi * (li - mu) ** 2 for pi, li in zip(p, row))
        values.append((row[y] - mu) / np.sqrt(var) if var > 0 else 0.0)
    return lowest(values, share)


def zlib_score(loss: float, text: str) -> float:
    """Negated loss over the zlib-compressed size in bytes."""
    import zlib

    return -loss / len(zlib.compress(text.encode("utf-8")))


def swapped(text: str, copy: int, seed: int, swap_ratio: float) -> str:
    """PAC's augmentation as documented: words are the non-space runs, whitespace stays in place; rng seeded with
    (seed, copy, first 12 hex digits of the text's SHA-256); positions a then offsets b drawn in two calls."""
    import hashlib
    import re

    parts = re.split(r"(\s+)", text)
    words = [i for i, p in enumerate(parts) if p.strip()]
    n = len(words)
    m = max(1, int(swap_ratio * n))
    rng = np.random.default_rng([seed, copy, int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)])
    a = rng.integers(0, n, m)
    b = rng.integers(1, n, m)
    for x, off in zip(a, b):
        i, j = words[x], words[(x + off) % n]
        parts[i], parts[j] = parts[j], parts[i]
    return "".join(parts)


def pac(model, tokenizer, text, seed=0, copies=5, swap_ratio=0.3, k1=0.05, k2=0.3, bos=None):
    """Member-oriented PAC: minus the authors' ``PD(x) - mean PD(aug)``, since their ``calculate_auc`` scores
    ``-PAC`` (a lower PAC means member)."""

    def polarized(t):
        lp = sorted(row[y] for row, y in full_softmax_rows(model, token_ids(tokenizer, t), bos))
        top = lp[::-1][: max(1, int(k1 * len(lp)))]
        bottom = lp[: max(1, int(k2 * len(lp)))]
        return float(np.mean(top) - np.mean(bottom))

    return float(np.mean([polarized(swapped(text, c, seed, swap_ratio)) for c in range(copies)])) - polarized(text)


def delong_by_definition(labels, base, other):
    """DeLong, DeLong and Clarke-Pearson (1988) as written: the kernel psi(x, y) = 1, 1/2 or 0 as a member's score x
    is above, equal to or below a non-member's y, evaluated on all m x n pairs; placement values V10 (per member)
    and V01 (per non-member) are its row and column means; ``(auc_base, auc_other, variance of the difference)``."""
    labels = np.asarray(labels)
    v10, v01, aucs = [], [], []
    for s in (np.asarray(base, float), np.asarray(other, float)):
        x, y = s[labels == 1], s[labels == 0]
        psi = np.array([[1.0 if xi > yj else 0.5 if xi == yj else 0.0 for yj in y] for xi in x])
        v10.append(psi.mean(axis=1))
        v01.append(psi.mean(axis=0))
        aucs.append(psi.mean())
    m, n = len(v10[0]), len(v01[0])

    def cov(a, b, k):
        return float(((a - a.mean()) * (b - b.mean())).sum() / (k - 1))

    s = [[cov(v10[i], v10[j], m) / m + cov(v01[i], v01[j], n) / n for j in (0, 1)] for i in (0, 1)]
    return aucs[0], aucs[1], s[0][0] + s[1][1] - 2 * s[0][1]


def dcpdd(model, ids, reference_ids, vocab: int, a: float = 0.01, bos=None) -> float:
    """DC-PDD as zhang-wei-chao/DC-PDD writes it: frequencies counted token by token over the reference texts and
    Laplace-smoothed (``fre_dis_smo``); over the first occurrence of each distinct predicted token, ``p * log(1 /
    f)`` clipped at ``a``; the mean (``-mean`` there, evaluated with ``roc_curve(labels, -score)``)."""
    counts = [0] * vocab
    for text_ids in reference_ids:
        for t in text_ids:
            counts[t] += 1
    freq = [(c + 1) / (sum(counts) + vocab) for c in counts]
    rows = full_softmax_rows(model, ids, bos)
    seen, values = [], []
    for row, y in rows:
        if y not in seen:
            seen.append(y)
            values.append(min(float(np.exp(row[y])) * np.log(1 / freq[y]), a))
    return float(np.mean(values))


def recall(model, prefix_ids, ids, bos=None) -> float:
    """ReCaLL as ruoyuxie/recall ``src/run.py`` computes it: the Hugging Face loss of the text's tokens after the
    prefix's (prefix positions labelled -100, ``get_conditional_ll``) over the loss of the text alone
    (``get_ll``); ``ll_nonmember / ll`` is the same ratio of losses. With ``bos``, it goes first in both passes
    and the text alone is scored from its second token (the querier's layout)."""
    head = [] if bos is None else [bos]
    concat = torch.tensor([head + list(prefix_ids) + list(ids)])
    labels = concat.clone()
    labels[:, : len(head) + len(prefix_ids)] = -100
    with torch.no_grad():
        conditional = float(model(concat, labels=labels).loss)
    alone = loss_by_labels(model, ids) if bos is None else loss_with_bos(model, ids, bos)
    return conditional / alone
