"""One vocabulary for what docaudit says about a document, and the rule that turns p-values into it.

A verdict is a statement about evidence, never about the truth: docaudit says "evidence of membership" when a
test rejects "this document is like the known non-members", "no evidence of membership" when it does not, and
"inconclusive" (with the reason) when no test it could run would be meaningful. It never says "non-member":
absence of evidence is not evidence of absence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

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
        from scipy.stats import false_discovery_control  # scipy.stats takes half a second: not on the CLI's path

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


def smallest_p(n_nonmembers: int, factor: int = 1) -> float:
    """The smallest p-value a conformal test against ``n_nonmembers`` known non-members can give: ``factor``/(n+1)
    (``factor`` 2 for the cross-conformal p-values of ``predict``, doubled to stay valid: inference/conformal.py)."""
    return min(1.0, factor / (n_nonmembers + 1))


def nonmembers_needed(alpha: float = DEFAULT_ALPHA, factor: int = 1) -> int:
    """The fewest known non-members whose smallest attainable p-value ``factor``/(n+1) is below ``alpha``."""
    n = max(1, int(np.floor(factor / alpha)) - 1)
    while smallest_p(n, factor) >= alpha:
        n += 1
    return n


def too_few_nonmembers(
    p_values, i: int, n_nonmembers: int, alpha: float = DEFAULT_ALPHA, factor: int = 1
) -> str | None:
    """The reason no document of the run can get "evidence of membership" whatever its score: the smallest
    attainable p-value ``factor``/(n+1) is not below ``alpha``, and the Benjamini–Hochberg q-value of a document is
    never below its p-value (it equals it at best, when every document has the smallest p-value); else None."""
    if p_values[i] is None or smallest_p(n_nonmembers, factor) < alpha:
        return None
    m = sum(v is not None for v in p_values)
    return (
        f"too few known non-members: with {n_nonmembers} the smallest p-value is {factor}/{n_nonmembers + 1} = "
        f"{smallest_p(n_nonmembers, factor):.3g}, not below {alpha:g}, so no document can reach it, before or after "
        f"the adjustment over {m} document{'s' if m != 1 else ''}; {nonmembers_needed(alpha, factor)} would be needed"
    )


def run_verdicts(
    p_values, reasons, n_nonmembers: int | None, alpha: float = DEFAULT_ALPHA, factor: int = 1
) -> list[Verdict]:
    """The verdicts of a run's documents: q-values by Benjamini–Hochberg over the documents that have a p-value,
    then per document "inconclusive" when ``reasons[i]`` (a list of strings) is not empty or too few non-members
    make "evidence" unreachable (``n_nonmembers``: the size of the null reference set, None when there is none;
    ``factor``: see :func:`smallest_p`), otherwise ``decide``."""
    p_values = list(p_values)
    q_values = bh_adjust(p_values)
    out = []
    for i, (p, q) in enumerate(zip(p_values, q_values)):
        why = list(reasons[i])
        if n_nonmembers is not None and (few := too_few_nonmembers(p_values, i, n_nonmembers, alpha, factor)):
            why.append(few)
        out.append(decide(p, q, alpha, inconclusive_reason="; ".join(why) or None))
    return out
