"""ReCaLL (Xie et al. 2024): how much a text's likelihood changes when non-member text is put before it."""

from __future__ import annotations

from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.registry import PassInput, View, register, register_pass
from docaudit.methods.detectors.tokens import _loss

PREFIX_SEPARATOR = "\n\n"  # between the prefix and the text (and between the prefix's shots)


OVER_WINDOW = "longer than one window with ReCaLL's prefix"
MISALIGNED = "tokenized differently after ReCaLL's prefix"


def recall_problem(detector: PassInput, text: str) -> tuple[str, str] | None:
    """Why ReCaLL cannot score ``text`` as defined, as ``(kind, reason)``, or None: prefix + separator + text must
    fit one window of the target's context (else the conditional loss would be taken over several windows, a
    different statistic), and the joined text's last tokens must be the text's own tokens (token alignment at
    the join; else the tokens scored after the prefix are not the text's)."""
    tokenizer, context = detector.target.lm.tokenizer, detector.target.query.context
    joined = tokenizer(joined_text(detector, text), add_special_tokens=False, verbose=False)["input_ids"]
    own = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    if len(joined) > context:
        return OVER_WINDOW, (
            f"ReCaLL's prefix and the text are {len(joined)} tokens, more than the {context}-token window: the "
            "conditional loss needs both in one window (use a shorter prefix or text)"
        )
    if list(joined[len(joined) - len(own) :]) != list(own):
        return MISALIGNED, (
            "the text's tokens after ReCaLL's prefix are not its tokens alone (the tokenizer merges across the "
            "join), so its conditional loss would score other tokens"
        )
    return None


def joined_text(detector: PassInput, text: str) -> str:
    """The non-member prefix (``DetectorConfig.recall_prefix``), a blank line, then the text."""
    if not detector.config.recall_prefix:
        raise DocauditError("method 'recall' needs a non-member prefix (docaudit sequence --recall-prefix FILE)")
    return detector.config.recall_prefix + PREFIX_SEPARATOR + text


@register_pass("recall")
def prefixed(detector: PassInput, text: str) -> list[str]:
    """The joined text (:func:`joined_text`), refused with a one-line error when ReCaLL cannot score the text
    (:func:`recall_problem`; ``sequence`` leaves such texts out as named skips before scoring)."""
    problem = recall_problem(detector, text)
    if problem is not None:
        raise DocauditError(f"method 'recall' cannot score this text: {problem[1]}")
    return [joined_text(detector, text)]


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
    (``roc_curve(labels, score)``: larger = member). Two differences from the authors' code: they tokenize prefix
    and text separately and join the ids with nothing between (``"".join(prefix)``, then ``torch.cat``), whereas
    docaudit queries the joined text with a blank line between prefix and text (``PREFIX_SEPARATOR``); and
    docaudit checks that the joined text's last tokens are the text's own (token alignment at the join) and that
    prefix + text fit one window, refusing the text otherwise (``recall_problem``; ``sequence`` skips such texts
    by name), where the authors' code drops prefix shots to fit. The separator's effect, measured by
    scripts/checks/recall_separator.py on the tests' lab target (10 member and 9 non-member 10-word excerpts, one
    non-member prefix): AUC 0.811 with the blank line, 0.933 without (19 texts, so the difference is within
    noise), scores 3.6% apart on average (at most 7.4%), rank correlation 0.80 (docs/methods.md, "ReCaLL")."""
    n = len(v.logp) + 1
    return _loss(v.extra["recall"][0][-n:]) / max(_loss(v.logp), 1e-12)
