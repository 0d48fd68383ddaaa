"""Likelihood detectors (Carlini et al. 2021): the loss, the loss over the zlib entropy, and the loss ratio of
the lowercased text."""

from __future__ import annotations

import zlib

from docaudit.config import DetectorConfig
from docaudit.methods.detectors.registry import PassInput, View, register, register_pass
from docaudit.methods.detectors.tokens import _loss


@register_pass("lower")
def lowercased(detector: PassInput, text: str) -> list[str]:
    """The lowercased text."""
    return [text.lower()]


@register("loss", "Loss", "mean log-probability (negative loss)")
def score_loss(v: View, c: DetectorConfig) -> float:
    """Loss attack: ``mean(logp) = -L(x)``. Checked against zjysteven/mink-plus-plus ``run.py`` (``scores['loss']
    = -loss``, larger = member) and swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``ppl = exp(L)``,
    negated by ``src/eval.py`` ``sweep``: lower perplexity = member)."""
    return -_loss(v.logp)


@register("zlib", "Zlib", "negative loss over the zlib-compressed size", uses_text=True)
def score_zlib(v: View, c: DetectorConfig) -> float:
    """Zlib attack (Carlini et al. 2021): ``-L(x) / Z(x)`` with ``Z(x) = len(zlib.compress(x.encode("utf-8")))``,
    the compressed size in bytes of the UTF-8 encoding at zlib's default level. Checked against
    zjysteven/mink-plus-plus ``run.py`` (``ll / len(zlib.compress(bytes(text, 'utf-8')))``, larger = member),
    swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``log(ppl) / zlib_entropy``, negated by ``sweep``)
    and iamgroot42/mimir ``mimir/attacks/zlib.py`` (``loss / zlib_entropy``, negated by ``get_roc_metrics``).
    Always <= 0; for equal ``Z`` a lower loss gives a higher score."""
    return -_loss(v.logp) / len(zlib.compress(v.text.encode("utf-8")))


@register("lowercase", "Lowercase", "loss of the lowercased text over the loss", passes=("lower",))
def score_lowercase(v: View, c: DetectorConfig) -> float:
    """Lowercase attack (Carlini et al. 2021): ``L(x.lower()) / L(x)`` (extra pass: the lowercased text); a
    memorized text has a low loss only in its original casing. Checked against zjysteven/mink-plus-plus
    ``run_ref.py`` (``ll_lowercase / ll``, larger = member) and swj0419/detect-pretrain-code ``src/run.py``
    ``inference`` (``-(log ppl_lower / log ppl)``, negated by ``sweep``)."""
    return _loss(v.extra["lower"][0]) / max(_loss(v.logp), 1e-12)
