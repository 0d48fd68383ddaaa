"""The reference-model detector (Carlini et al. 2021): the loss gap between a reference model and the target."""

from __future__ import annotations

from docaudit.config import DetectorConfig
from docaudit.methods.detectors.registry import PassInput, View, register, register_pass
from docaudit.methods.detectors.tokens import _loss


@register_pass("ref", model="ref")
def same_text(detector: PassInput, text: str) -> list[str]:
    """The text itself, queried through the reference model."""
    return [text]


@register("ref", "Ref", "reference model's loss minus the target's", passes=("ref",), default=False)
def score_ref(v: View, c: DetectorConfig) -> float:
    """Reference-model attack (Carlini et al. 2021): ``L_ref(x) - L(x)``, a difference of losses (each per token of
    its own model's tokenization, so the models need not share a tokenizer). Checked against
    zjysteven/mink-plus-plus ``run_ref.py`` (``ll - ll_ref``, larger = member), swj0419/detect-pretrain-code
    ``src/run.py`` ``inference`` (``L - L_ref``, negated by ``sweep``) and iamgroot42/mimir
    ``mimir/attacks/reference.py`` (``loss - ref_loss`` with mimir's loss, negated)."""
    return _loss(v.extra["ref"][0]) - _loss(v.logp)
