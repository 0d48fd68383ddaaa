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
            logits = logits[len(prefix):]
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
