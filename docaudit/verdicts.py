"""One vocabulary for what docaudit says about a document, and the rule that turns p-values into it.

A verdict is a statement about evidence, never about the truth: docaudit says "evidence of membership" when a
test rejects "this document is like the known non-members", "no evidence of membership" when it does not, and
"inconclusive" (with the reason) when no test it could run would be meaningful. It never says "non-member":
absence of evidence is not evidence of absence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import false_discovery_control

EVIDENCE = "evidence of membership"
NO_EVIDENCE = "no evidence of membership"
INCONCLUSIVE = "inconclusive"
VERDICTS = (EVIDENCE, NO_EVIDENCE, INCONCLUSIVE)
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Verdict:
    """A verdict with the numbers it rests on (``reason`` is set for "inconclusive" and says why)."""

    verdict: str
    reason: str | None = None
    p_value: float | None = None
    q_value: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def bh_adjust(p_values) -> list[float | None]:
    """Benjamini–Hochberg q-values over the p-values that exist (``None`` stays ``None`` and is not counted)."""
    p = list(p_values)
    present = [i for i, v in enumerate(p) if v is not None]
    q: list[float | None] = [None] * len(p)
    if present:
        adjusted = false_discovery_control(np.asarray([p[i] for i in present], dtype=float), method="bh")
        for i, v in zip(present, adjusted):
            q[i] = float(v)
    return q


def decide(
    p_value: float | None,
    q_value: float | None,
    alpha: float = DEFAULT_ALPHA,
    *,
    inconclusive_reason: str | None = None,
) -> Verdict:
    """The verdict of one document: "inconclusive" when a reason says the test cannot be trusted or there is no
    p-value; otherwise "evidence of membership" exactly when the adjusted p-value (the p-value itself when no
    adjustment was made) is below ``alpha``."""
    if inconclusive_reason is not None or p_value is None:
        return Verdict(INCONCLUSIVE, inconclusive_reason or "no p-value could be computed", p_value, q_value)
    decisive = p_value if q_value is None else q_value
    return Verdict(EVIDENCE if decisive < alpha else NO_EVIDENCE, None, p_value, q_value)
