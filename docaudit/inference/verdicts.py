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
DEFAULT_ALPHA = 0.05  # the one default level of every verdict docaudit prints (each command's --alpha)
# the blind gate's own level: a document the blind baseline separates from the known non-members (blind p-value
# below it) is "inconclusive"; fixed, so that a smaller --alpha never lets more shifted documents through the gate
BLIND_GATE_LEVEL = 0.05

# the synthetic-control test as a next step: on the embedded model it runs as written (a null library ships for it)
CONTROLS_STEP = "(docaudit controls BOOK; with a model other than the embedded one, add --null-library DIR)"
# training as a next step, bounded: an excerpt of 512 tokens per document keeps training on a corpus of whole books
# to minutes on a small CPU instead of days (docs/benchmarks.md); its --dry-run gives the time on the machine
TRAIN_STEP = (
    "docaudit train --members DIR --nonmembers DIR --max-tokens 512 --out models/mine; its --dry-run says how long"
)
# why a verdict is "inconclusive": a code for machines and the one-line next step printed for people
NEXT_STEPS = {
    "classifier_at_chance": f"train a classifier on your own known members and non-members ({TRAIN_STEP}) where "
    "it separates them, or test the book against synthetic controls " + CONTROLS_STEP,
    "too_few_nonmembers": f"give at least the number named of known non-members ({TRAIN_STEP}; docaudit report "
    "--calibrate-nonmembers DIR)",
    "blind_separates": f"compare with known non-members of the same era and kind of text ({TRAIN_STEP}), test the "
    "book against synthetic controls " + CONTROLS_STEP + ", or plant traps before "
    "publishing (docaudit traps make)",
    "distribution_shift": "train on member and non-member sets that differ only by whether the model saw them, not "
    "by era or source, or test the book against synthetic controls " + CONTROLS_STEP,
    "too_few_tokens": "give a longer text, or train a classifier on documents as short as this one",
    "too_many_tokens": "score an excerpt as long as the known non-members (cut the text), or train a classifier "
    "whose documents are as long as this one, or all cut to one length (docaudit train --max-tokens N)",
    "training_document": "this document trained the classifier itself; judge it with a classifier trained without "
    "it (docaudit train without this file)",
    "retrain": "train the classifier again with this version of docaudit (docaudit train, the same options)",
    "no_p_value": "see the reason",
    "threshold_separates_nothing": "calibrate with members and non-members the detector separates (other "
    "--methods, longer snippets)",
    "calibration_at_chance": "calibrate with members and non-members the detector separates (other --methods, "
    "longer --snippet-words, more calibration books), or test the book against synthetic controls " + CONTROLS_STEP,
    "threshold_false_positives": "choose a threshold with fewer false positives (--target-fpr 0.05) or calibrate "
    "with books the detector separates (other --methods, longer --snippet-words)",
    "no_library": "give never-seen texts of the same era and kind as the book, probed the same way (docaudit probe "
    "BOOK --null-library DIR)",
    "model_cannot_answer": "DE-COP needs a model that follows instructions and reads the options: probe this model "
    "with n-gram coverage (docaudit probe BOOK --probe ngram)",
    "unreadable_answers": "use the model's chat endpoint (--endpoint chat), or probe it with n-gram coverage "
    "(--probe ngram)",
    "too_few_passages": "give a longer text, or shorter passages (--prompt-words, --continuation-words, --decop-words)"
    "; for DE-COP with a paraphrase file, passages of this text in the file",
    "too_small_library": "give a null library of at least the number named of never-seen texts, each at least as "
    "long as the book (docaudit controls BOOK --null-library DIR, or docaudit probe BOOK --null-library DIR)",
    "library_too_short": "give never-seen texts long enough to hold the book's layout (as many stretches as the "
    "book's passages: --stretch-tokens for controls, --stretch-words for probe), or more of them (docaudit controls "
    "BOOK --null-library DIR, or docaudit probe BOOK --null-library DIR)",
    "too_short_for_layout": "give a longer text, or shorter stretches (--stretch-tokens for controls, --stretch-words "
    "for probe) with a null library computed at them",
    "unreachable_in_run": "give a null library of at least the number named of never-seen texts (each long enough to "
    "hold the book's layout), or judge fewer books in one run (Benjamini-Hochberg over fewer books asks less of each)",
    "library_differs": "give a null library of never-seen texts of the book's era and kind (docaudit controls BOOK "
    "--null-library DIR, or docaudit probe BOOK --null-library DIR)",
    "too_few_of_its_length": "train a classifier whose known non-members include more documents of this length: "
    "read to the same --max-tokens (docaudit train --max-tokens N), or of a length within a factor of two",
    "too_few_snippets": "give a longer book, or shorter snippets (--snippet-words) or fewer (--min-snippets) for every "
    "book",
}


@dataclass(frozen=True)
class Reason:
    """Why a document's verdict is "inconclusive": ``code`` (a key of ``NEXT_STEPS``) and the sentence."""

    code: str
    text: str

    @property
    def next_step(self) -> str:
        return NEXT_STEPS.get(self.code, NEXT_STEPS["no_p_value"])


def as_reason(reason) -> Reason:
    """A :class:`Reason`, or a sentence without a code (``other``)."""
    return reason if isinstance(reason, Reason) else Reason("other", str(reason))


@dataclass(frozen=True)
class Verdict:
    """A verdict with the numbers it rests on (``reason`` is set for "inconclusive" and says why; ``reason_codes``
    names each reason, :data:`NEXT_STEPS`)."""

    verdict: str
    reason: str | None = None
    p_value: float | None = None
    q_value: float | None = None
    reason_codes: tuple[str, ...] = ()
    reasons: tuple[Reason, ...] = ()

    def as_dict(self) -> dict:
        out = asdict(self)
        out["reason_codes"] = list(self.reason_codes)
        out["reasons"] = [{"code": r.code, "text": r.text, "next_step": r.next_step} for r in self.reasons]
        return out


ADJUSTMENTS = {"bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}


def bh_adjust(p_values, method: str = "bh") -> list[float | None]:
    """Benjamini–Hochberg (``"bh"``) or Benjamini–Yekutieli (``"by"``) q-values over the p-values that exist
    (``None`` stays ``None`` and is not counted). BH controls the false discovery rate for independent or
    positively dependent (PRDS) p-values; BY, BH's q-values times ``sum(1/i, i <= m)``, under any dependence."""
    p = list(p_values)
    present = [i for i, v in enumerate(p) if v is not None]
    q: list[float | None] = [None] * len(p)
    if present:
        from scipy.stats import false_discovery_control  # scipy.stats takes half a second: not on the CLI's path

        adjusted = false_discovery_control(np.asarray([p[i] for i in present], dtype=float), method=method)
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


def smallest_p(n_nonmembers: int) -> float:
    """The smallest p-value a conformal test against ``n_nonmembers`` known non-members can give, 1/(n+1): the
    rank p-value when the document scores above every one of them (inference/conformal.py)."""
    return min(1.0, 1 / (n_nonmembers + 1))


def nonmembers_needed(alpha: float = DEFAULT_ALPHA) -> int:
    """The fewest known non-members whose smallest attainable p-value 1/(n+1) is below ``alpha``."""
    n = max(1, int(np.floor(1 / alpha)) - 1)
    while smallest_p(n) >= alpha:
        n += 1
    return n


def too_few_nonmembers(n_nonmembers: int, alpha: float = DEFAULT_ALPHA) -> Reason | None:
    """The reason no document judged against ``n_nonmembers`` known non-members can get "evidence of membership"
    whatever its score: the smallest attainable p-value 1/(n+1) is not below ``alpha`` (and a Benjamini–Hochberg
    q-value is never below its p-value); else None. It depends on no document, so it is a gate like the others."""
    if smallest_p(n_nonmembers) < alpha:
        return None
    return Reason(
        "too_few_nonmembers",
        f"too few known non-members: with {n_nonmembers} the smallest p-value is 1/{n_nonmembers + 1} = "
        f"{smallest_p(n_nonmembers):.3g}, not below {alpha:g}, so no document can reach it; "
        f"{nonmembers_needed(alpha)} would be needed",
    )


def too_few_of_its_length(compared: int | None, n_tokens: int, alpha: float = DEFAULT_ALPHA) -> list[Reason]:
    """Why a document ranked among the ``compared`` known non-members of its length class alone cannot get
    "evidence of membership" at ``alpha`` (none of its class, or too few for a p-value below ``alpha``); empty
    where it can."""
    if compared is None or smallest_p(compared) < alpha:
        return []
    return [
        Reason(
            "too_few_of_its_length",
            f"{compared} known non-members were read to a length like this document's ({n_tokens} tokens queried: "
            f"the token budget, or within a factor of two), and it is ranked among them alone; the smallest p-value "
            f"is then 1/{compared + 1}, not below {alpha:g} ({nonmembers_needed(alpha)} of its length would be "
            "needed)",
        )
    ]


def _q_at(p: float, others: list[float], method: str) -> float:
    """The q-value a document would get at the p-value ``p``, the run's other p-values ``others`` unchanged."""
    return bh_adjust([p, *others], method)[0]


def reachable_size(others: list[float], alpha: float, method: str = "bh", limit: int = 10**7) -> int | None:
    """The fewest null texts ``n`` whose smallest p-value 1/(n + 1) gives a q-value below ``alpha`` among the run's
    other p-values ``others`` (the q-value grows with the p-value, so a search over ``n`` halves); None past
    ``limit``."""
    if _q_at(1 / (limit + 1), others, method) >= alpha:
        return None
    lo, hi = 0, limit  # q at 1/(lo + 1) >= alpha (or lo = 0), q at 1/(hi + 1) < alpha
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _q_at(1 / (mid + 1), others, method) < alpha:
            hi = mid
        else:
            lo = mid
    return hi


def _unreachable(i: int, p_values, smallest, alpha: float, method: str) -> Reason | None:
    """The reason document ``i`` (no evidence at ``alpha``) could not have got evidence in this run: even at its
    smallest attainable p-value ``smallest[i]`` its q-value over the run's other p-values would not be below
    ``alpha``; None where it could."""
    others = [p for j, p in enumerate(p_values) if j != i and p is not None]
    if smallest[i] is None or _q_at(smallest[i], others, method) < alpha:
        return None
    texts = int(round(1 / smallest[i])) - 1
    needed = reachable_size(others, alpha, method)
    more = "no library size would reach it" if needed is None else f"{needed} would reach it"
    return Reason(
        "unreachable_in_run",
        f"evidence was out of reach in this run: ranked among {texts} never-seen texts the smallest p-value is "
        f"1/{texts + 1} = {smallest[i]:.3g}, and {ADJUSTMENTS[method]} over the run's {len(others) + 1} documents "
        f"would not bring even that below {alpha:g}; {more}",
    )


def run_verdicts(
    p_values, reasons, n_nonmembers: int | None, alpha: float = DEFAULT_ALPHA, method: str = "bh", smallest=None
) -> list[Verdict]:
    """The verdicts of a run's documents. Gates first: a document is "inconclusive" when ``reasons[i]`` (a list of
    :class:`Reason` or sentences) is not empty, when it has no p-value, or when too few known non-members make
    evidence unreachable (``n_nonmembers``: the size of the null reference set, None when there is none). Then
    q-values (:func:`bh_adjust` with ``method``) over the documents that passed every gate, and :func:`decide` for
    each of them; a gated document has no q-value. (Gating after the adjustment can raise the false discovery rate:
    removing rejected documents leaves the false ones in a smaller set of discoveries, docs/methods.md.) Last, with
    ``smallest`` (per document its smallest attainable p-value, or None), a document without evidence that could
    not have got it even at that p-value, the run's other q-values' inputs unchanged, is "inconclusive"
    (``unreachable_in_run``, naming the null size that would reach it): "no evidence" says the test could have
    found evidence and did not. This only renames verdicts that are not evidence, so the evidence found, and the
    false discovery rate, are unchanged."""
    p_values = list(p_values)
    why = [[as_reason(r) for r in reasons[i]] for i in range(len(p_values))]
    few = None if n_nonmembers is None else too_few_nonmembers(n_nonmembers, alpha)
    for i, p in enumerate(p_values):
        if few is not None and p is not None:
            why[i].append(few)
    passed = [p if p is not None and not why[i] else None for i, p in enumerate(p_values)]
    q_values = bh_adjust(passed, method)
    out = []
    for i, (p, q) in enumerate(zip(p_values, q_values)):
        if smallest is not None and passed[i] is not None and decide(p, q, alpha).verdict == NO_EVIDENCE:
            if (out_of_reach := _unreachable(i, passed, smallest, alpha, method)) is not None:
                why[i].append(out_of_reach)
        v = decide(p, q, alpha, inconclusive_reason="; ".join(r.text for r in why[i]) or None)
        found = tuple(why[i]) or ((Reason("no_p_value", v.reason),) if v.verdict == INCONCLUSIVE else ())
        out.append(Verdict(v.verdict, v.reason, v.p_value, v.q_value, tuple(r.code for r in found), found))
    return out
