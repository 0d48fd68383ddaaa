"""Min-K% Prob (Shi et al. 2024) and Min-K%++ (Zhang et al. 2024): the mean of a text's least likely tokens."""

from __future__ import annotations

from docaudit.config import DetectorConfig
from docaudit.methods.detectors.registry import View, register
from docaudit.methods.detectors.tokens import lowest_mean, minkpp_tokens


@register("mink", "Min-K% Prob", "mean of the lowest k% token log-probabilities")
def score_mink(v: View, c: DetectorConfig) -> float:
    """Min-K% Prob (Shi et al. 2024): the mean of the lowest ``max(1, int(k * n))`` values of ``logp``. Checked
    against swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``-mean(sorted(all_prob)[:int(n * ratio)])``,
    negated by ``src/eval.py`` ``sweep``), zjysteven/mink-plus-plus ``run.py`` (``mink_{ratio}``, larger = member)
    and iamgroot42/mimir ``mimir/attacks/min_k.py`` (negated mean, negated again by ``get_roc_metrics``). The
    authors' ``int(n * ratio)`` is empty for very short texts; docaudit takes at least one token."""
    return lowest_mean(v.logp, c.k)


@register("minkpp", "Min-K%++", "mean of the lowest k% standardized token log-probabilities", needs=("logp", "moments"))
def score_minkpp(v: View, c: DetectorConfig) -> float:
    """Min-K%++ (Zhang et al. 2024): per token ``(logp - mu) / sigma`` with ``mu`` and ``sigma`` the mean and
    standard deviation of ``log p`` under the model's next-token distribution (0 where ``sigma == 0``: a flat or
    one-hot distribution says nothing), then the mean of the lowest ``max(1, int(k * n))``. Checked against
    zjysteven/mink-plus-plus ``run.py`` (``(token_log_probs - mu) / sigma.sqrt()`` with ``sigma`` the variance
    ``E[log p ** 2] - mu ** 2``; ``mink++_{ratio}``, larger = member) and iamgroot42/mimir
    ``mimir/attacks/min_k_plus_plus.py`` (negated, negated again by ``get_roc_metrics``)."""
    return lowest_mean(minkpp_tokens(v.logp, v.mu, v.sigma), c.k)
