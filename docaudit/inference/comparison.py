"""What docaudit says when it compares a membership score with a blind classifier of the texts (no language model):
the second part of the one vocabulary (the first, about documents, is :mod:`docaudit.inference.verdicts`).

These readings are about two scores on labelled documents, never about one document's membership, so none of them
is "evidence of membership". Each names the blind classifier it was compared with, because that is all that was
tested: a model score that separates the sets beyond what a TF-IDF classifier separates may still follow a
difference between the sets (era, topic, source) that this classifier does not see, with no membership signal at
all (docs/methods.md, "Beyond the blind baseline", measures how often).
"""

from __future__ import annotations

ADDS = (
    "the model adds evidence beyond what the {blind} separates (membership, or a difference between the sets "
    "that this classifier does not see)"
)
NO_EVIDENCE_BEYOND = "no evidence beyond what the {blind} separates"
NOTHING = (
    "the model adds nothing beyond the {blind}: the combiner gave the model's score weight 0 in every fold, so the "
    "combined score is the blind baseline's"
)
READINGS = (ADDS, NO_EVIDENCE_BEYOND, NOTHING)


def comparison_verdict(delta_lo: float, p_value: float | None, alpha: float, model_weighted: bool = True) -> str:
    """The reading's template: the model adds nothing when the combiner never weighted its score; it adds evidence
    only when the AUC difference's interval lies above 0 and its p-value (when there is one) is below ``alpha``."""
    if not model_weighted:
        return NOTHING
    return ADDS if delta_lo > 0 and p_value is not None and p_value < alpha else NO_EVIDENCE_BEYOND


def reading(template: str, kind: str | None) -> str:
    """A reading with the blind classifier it was compared with named (``kind``: tfidf, nb, dates; None when not
    known)."""
    return template.format(blind=f"{kind} blind classifier" if kind else "blind classifier")
