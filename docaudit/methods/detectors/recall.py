"""ReCaLL (Xie et al. 2024): how much a text's likelihood changes when non-member text is put before it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.registry import View, register, register_pass
from docaudit.methods.detectors.tokens import _loss

if TYPE_CHECKING:
    from docaudit.methods.detectors.detector import Detector

PREFIX_SEPARATOR = "\n\n"  # between the prefix and the text (and between the prefix's shots)


@register_pass("recall")
def prefixed(detector: Detector, text: str) -> list[str]:
    """The non-member prefix (``DetectorConfig.recall_prefix``), a blank line, then the text."""
    if not detector.config.recall_prefix:
        raise DocauditError("method 'recall' needs a non-member prefix (docaudit sequence --recall-prefix FILE)")
    return [detector.config.recall_prefix + PREFIX_SEPARATOR + text]


@register(
    "recall",
    "ReCaLL",
    "loss of the text after a non-member prefix over its loss alone",
    passes=("recall",),
    default=False,
)
def score_recall(v: View, c: DetectorConfig) -> float:
    """ReCaLL (Xie et al. 2024): ``L(x | P) / L(x)`` with ``P`` a prefix of non-member text; ``L(x | P)`` is the
    mean loss of the text's tokens queried after the prefix (extra pass: prefix + blank line + text; the last
    ``n + 1`` scored tokens, where ``n`` tokens of the text are scored alone: the text's first token is then
    predicted from the prefix, as in the authors' code). A member's likelihood drops more under a non-member
    prefix, so a larger ratio means member. Checked against ruoyuxie/recall ``src/run.py`` ``inference``
    (``pred["recall"] = ll_nonmember / ll``, log-likelihoods, i.e. the same ratio of losses; ``ll_nonmember``
    from ``get_conditional_ll``, which labels only the target's tokens) and ``src/eval.py`` ``sweep``
    (``roc_curve(labels, score)``: larger = member). The authors tokenize prefix and text separately and join the
    ids; docaudit queries the joined text, whose tokens end with the text's own wherever the tokenizer starts a
    token at the blank line (byte-level BPE does). The extra pass costs one query of prefix + text per text; it
    is meant for texts that, with the prefix, fit one window."""
    n = len(v.logp) + 1
    return _loss(v.extra["recall"][0][-n:]) / max(_loss(v.logp), 1e-12)
