"""The blind check of a null library against a book, for ``controls`` and ``probe``: the book's model-free profile
(``methods.text_profile``) ranked among the library texts' (``inference.outlier``), reported as ``p_value_blind``
beside the test's p-value, and the gate that makes the book "inconclusive" where the library is told apart from
it by text alone (below ``BLIND_GATE_LEVEL``, the one level of every blind gate). The gate only removes verdicts, so
the test's level holds with it; what it adds is that a library of another era or kind than the book, which makes
the test's p-value invalid, is caught where the texts show it (docs/methods.md, "The library checked against the
book")."""

from __future__ import annotations

import math

import numpy as np

from docaudit.inference.outlier import outlier_p
from docaudit.inference.verdicts import BLIND_GATE_LEVEL, Reason
from docaudit.methods.text_profile import FEATURES, text_profile


def profile_of(text: str) -> list[float]:
    return text_profile(text).tolist()


def checked_profile(value, where: str) -> list[float] | None:
    """A stored profile (None where the library predates profiles), ``ValueError`` when it is malformed."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != len(FEATURES):
        raise ValueError(f"{where}: a profile must be a list of {len(FEATURES)} numbers")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{where}: a profile holds a value that is not a finite number")
    return [float(v) for v in value]


def library_check(profile, library_profiles: list) -> tuple[float | None, Reason | None]:
    """The book's blind p-value among the library texts that have a profile (None where none has, or the book has
    none) and, below ``BLIND_GATE_LEVEL``, the reason that makes it inconclusive."""
    others = [p for p in library_profiles if p is not None]
    if profile is None or not others:
        return None, None
    p = outlier_p(np.asarray(profile), [np.asarray(o) for o in others])
    if p >= BLIND_GATE_LEVEL:
        return p, None
    return p, Reason(
        "library_differs",
        f"the library texts differ from this book by their text alone (p_value_blind {p:.3g} < "
        f"{BLIND_GATE_LEVEL:g}: ranked among {len(others)} library texts by word, punctuation and sentence rates, it "
        "lies further from them than they lie from each other), so they may not be texts like it and its p-value "
        "may reflect that, not training",
    )
