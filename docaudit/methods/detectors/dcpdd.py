"""DC-PDD (Zhang et al. 2024): the model's probabilities calibrated by how frequent each token is in a reference
corpus."""

from __future__ import annotations

import numpy as np

from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.registry import View, register


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct id, in order."""
    _, first = np.unique(np.asarray(ids), return_index=True)
    return np.sort(first)


@register("dcpdd", "DC-PDD", "token probabilities calibrated by reference-corpus token frequencies", default=False)
def score_dcpdd(v: View, c: DetectorConfig) -> float:
    """DC-PDD (Zhang et al. 2024), member-oriented: over the first occurrence of each distinct scored token ``x_i``,
    ``alpha_i = min(p(x_i) * -log f(x_i), a)`` with ``p`` the target's probability of the token, ``f`` its
    Laplace-smoothed frequency in a reference corpus (``Detector.frequencies``) and ``a = dcpdd_a``; the score is
    ``mean_i alpha_i``. A token the model finds likely although it is rare in general text is evidence of
    training. Checked against zhang-wei-chao/DC-PDD ``com_det_sco.py`` ``cal_met`` (``ce = x_pro * np.log(1 /
    x_fre)``, ``ce[ce > a] = a``, ``pred["DC-PDD"] = -np.mean(ce)``, evaluated by ``sweep`` as
    ``roc_curve(labels, -score)``: a larger mean means member, the orientation kept here) and ``com_fre_dis.py``
    (frequencies counted over the reference corpus's tokens)."""
    if v.frequencies is None or v.targets is None:
        raise DocauditError(
            "method 'dcpdd' needs token frequencies of a reference corpus (--freq-corpus of sequence, evaluate "
            "and score)"
        )
    first = first_occurrences(v.targets)
    p = np.exp(np.asarray(v.logp, dtype=np.float64)[first])
    alpha = p * -np.log(np.asarray(v.frequencies, dtype=np.float64)[v.targets[first]])
    return float(np.minimum(alpha, c.dcpdd_a).mean())
