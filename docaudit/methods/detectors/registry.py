"""Sequence-level membership scores, every one oriented so that **higher = more member-like** (docs/methods.md,
"Sequence-level detectors").

A score is computed from a *view* of one sequence: the target model's per-token ``logp``, ``mu`` and ``sigma``
(TokenStats arrays, or a slice of them for one querier window), the sequence's text where a method needs it, and
the log-probabilities of the extra passes the method needs (texts derived from the sequence, queried through a
Querier and therefore cached like any document). With ``L(x) = -mean(logp)``, the cross-entropy loss in nats per
scored token of text ``x``:

- ``loss``: ``-L(x)``; ``zlib``: ``-L(x) / Z(x)``, ``Z`` the zlib-compressed size of the UTF-8 bytes;
  ``lowercase``: ``L(x.lower()) / L(x)``; ``ref``: ``L_ref(x) - L(x)``; ``mink``: Min-K% Prob; ``minkpp``:
  Min-K%++; ``pac``: ``mean_i PD(aug_i(x)) - PD(x)``; ``neighbor``: ``mean_j L(nb_j(x)) - L(x)``.

Each score function below says which file and function of its authors' public code it was checked against, and
how that code orients the score. Those scripts score a text with one forward pass of ``tokenizer.encode(text)``;
for a text that fits one window of the querier (fewer tokens than the context) docaudit's view is the same single
pass, so the scores are exactly the sequence-level definitions (one difference: with a tokenizer that puts a BOS
first, the authors' scripts also score the first text token, predicted from the BOS alone; docaudit does not
score it). A longer text is scored over all its windows' tokens (each window an independent pass,
docs/methods.md, "Querying").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.query.backends.base import provides, require

if TYPE_CHECKING:
    from docaudit.query.querier import Querier


class PassInput(Protocol):
    """What an extra pass reads from the detector that runs it (``detector.Detector`` is one): the detectors'
    configuration, the target's querier (its tokenizer and context) and the maker of neighbour texts."""

    config: DetectorConfig
    target: Querier
    neighbors: Callable[[str], list[str]] | None


ScoreFn = Callable[["View", DetectorConfig], float]  # a detector's score of one sequence
PassFn = Callable[[PassInput, str], list[str]]  # an extra pass: the texts it derives from a sequence's text


@dataclass
class View:
    """What a score is computed from: the target's per-token arrays of one sequence, its text (None when no
    selected method needs it), the log-probabilities of each extra pass (pass name -> one array per text), the
    scored token ids (aligned with ``logp``) and the detector's reference token frequencies, when known."""

    logp: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    text: str | None = None
    extra: dict[str, list[np.ndarray]] = field(default_factory=dict)
    targets: np.ndarray | None = None
    frequencies: np.ndarray | None = None


@dataclass(frozen=True)
class Pass:
    """An extra pass: the texts it derives from a sequence's text, and which model queries them."""

    texts: PassFn
    model: str = "target"  # "target" | "ref"


@dataclass(frozen=True)
class Method:
    """A detector: its name, display title, extra passes, whether it reads the text, whether it runs by default,
    its score (whose docstring is the method's documentation), a one-line help, and the statistics it needs from
    the querier's backend (``docaudit.query.backends.base.STATISTICS``)."""

    name: str
    title: str
    score: ScoreFn
    passes: tuple[str, ...] = ()
    uses_text: bool = False
    default: bool = True
    help: str = ""
    needs: tuple[str, ...] = ("logp",)

    @property
    def needs_text(self) -> bool:
        """Whether the score reads the sequence's text, itself or through an extra pass."""
        return self.uses_text or bool(self.passes)


METHODS: dict[str, Method] = {}
PASSES: dict[str, Pass] = {}


def register(
    name: str,
    title: str,
    help: str,
    passes: tuple[str, ...] = (),
    uses_text: bool = False,
    default: bool = True,
    needs: tuple[str, ...] = ("logp",),
) -> Callable[[ScoreFn], ScoreFn]:
    """Register the decorated ``score(view, config) -> float`` as detector ``name``: its docstring documents the
    method, ``help`` is its one-line summary on the command line, ``needs`` the backend statistics it reads."""

    def add(score: ScoreFn) -> ScoreFn:
        METHODS[name] = Method(name, title, score, passes, uses_text, default, help, needs)
        return score

    return add


def check_served(names: Iterable[str], backend: str) -> None:
    """Stop, before any query, when ``backend`` cannot provide what a selected method needs (one line naming the
    methods that would run with it)."""
    served = provides(backend)
    works = [n for n, m in METHODS.items() if set(m.needs) <= served]
    for name in names:
        require(backend, f"method '{name}'", METHODS[name].needs, works)


def register_pass(name: str, model: str = "target") -> Callable[[PassFn], PassFn]:
    """Register the decorated ``texts(detector, text) -> list[str]`` as extra pass ``name``."""

    def add(texts: PassFn) -> PassFn:
        PASSES[name] = Pass(texts, model)
        return texts

    return add


def default_methods() -> tuple[str, ...]:
    """The detectors that run when none are named."""
    return tuple(name for name, m in METHODS.items() if m.default)


def methods_help() -> str:
    """One line per detector for the command line's help."""
    return "; ".join(f"{name}: {m.help}" for name, m in METHODS.items())


def resolve_methods(
    names: Iterable[str] | str | None, ref: bool = False, neighbor: bool = False, backend: str = "transformers"
) -> list[str]:
    """Validated method names (a comma-separated string or a list; None: the defaults ``backend`` can serve, plus
    ``ref`` / ``neighbor`` when their model is given)."""
    if names is None:
        served = provides(backend)
        names = [n for n in default_methods() if set(METHODS[n].needs) <= served]
        names += ["ref"] * ref + ["neighbor"] * neighbor
    elif isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise DocauditError(
            f"unknown method(s) {', '.join(unknown) or '(none given)'}: choose from {', '.join(METHODS)}"
        )
    return names
