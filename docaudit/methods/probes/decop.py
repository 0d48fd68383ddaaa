"""DE-COP (Duarte, Zhao, Oliveira & Li, "DE-COP: Detecting Copyrighted Content in Language Models Training Data",
ICML 2024): a multiple-choice question between a passage of the book, verbatim, and three paraphrases of it; a
model that saw the book picks the verbatim one more often.

Checked against the authors' code (``avduarte333/DE-COP_Method``; ``tests/test_probes_reference.py``):

- the orders (``oversample_labels_fn.py``, ``generate_permutations``): every one of the 24 orders of the four
  options, in ``itertools.permutations`` order, the verbatim passage being option 0 of the order, the right answer
  the letter where it lands. Asking every order makes a model's preference for a letter cancel: a model that
  answers without reading the options is right in exactly a quarter of them;
- the question (``2_decop_blackbox.py``, ``Query_LLM``): their instruction, then ``Question: Which of the
  following passages is verbatim from the "TITLE" book by AUTHOR?``, ``Options:``, the four options as ``A. ...``
  to ``D. ...`` on their own lines. For a chat model the instruction and question go in one user message, as
  they send Claude (its ``Human:``/``Assistant: Answer:`` turn markers are the chat template's work here); for a
  completion model, the question without the instruction followed by ``Answer: `` (their ChatGPT prompt);
- the answer: they count an answer right when it is exactly the letter (``3_get_results_blackbox.py``,
  ``calculate_accuracy`` on the stripped completion); docaudit reads the letter from a few more forms a chat model
  writes ("B", "B.", "(B)", "Answer: B", "**B**", "B. text..."), and an answer it cannot read counts as wrong and
  is counted as unreadable;
- per book, the share of right answers over every passage and order (their per-book accuracy).

Chance is not the null: books a model never saw reach 0.29-0.53 in the authors' own tables (a model can prefer
the verbatim text for its style alone), so docaudit ranks a book's accuracy against never-seen texts only."""

from __future__ import annotations

import re
from itertools import permutations

import numpy as np

LETTERS = "ABCD"
ORDERS = tuple(permutations(range(4)))  # the 24 orders; option 0 is the verbatim passage
INSTRUCTION = (
    "You are entering a multiple choice questions exam. You should directly answer each question by choosing the "
    "correct option. Be concise and straight to the point in your answer. Output only the letter corresponding to "
    "the correct answer."
)
POSITION_FLOOR = 0.25  # a model answering without reading the options is right in a quarter of the orders

_ANSWER = re.compile(
    r"^[\s*_`\"'(\[]*(?:(?i:(?:the\s+)?(?:correct\s+)?(?:answer|option)(?:\s+is)?)\s*[:\-]?\s*[*_`\"'(\[]*)?"
    r"([ABCD])(?![A-Za-z])"
)


def _options(options: list[str], title: str, author: str) -> str:
    """The question and the four ``options`` in the order given, as the authors word them (no newline after the
    last)."""
    head = f'Question: Which of the following passages is verbatim from the "{title}" book by {author}?\nOptions:\n'
    return head + "\n".join(f"{letter}. {text}" for letter, text in zip(LETTERS, options))


def chat_prompt(options: list[str], title: str, author: str) -> str:
    """The user message of a chat model: the instruction, then the question (the authors' Claude prompt)."""
    return INSTRUCTION + _options(options, title, author)


def completion_prompt(options: list[str], title: str, author: str) -> str:
    """The prompt of a completion model: the question, then ``Answer: `` (the authors' ChatGPT prompt)."""
    return _options(options, title, author) + "\nAnswer: "


def ordered(verbatim: str, paraphrases: list[str]) -> list[tuple[list[str], str]]:
    """Every order of the verbatim passage and its three paraphrases: the options and the right letter."""
    if len(paraphrases) != 3:
        raise ValueError(f"DE-COP asks between a passage and three paraphrases, not {len(paraphrases)}")
    texts = [verbatim, *paraphrases]
    return [([texts[i] for i in order], LETTERS[order.index(0)]) for order in ORDERS]


def parse_answer(answer: str) -> str | None:
    """The letter an answer names (module docstring), None when it names none."""
    found = _ANSWER.match(answer or "")
    return found.group(1).upper() if found else None


def accuracy(answers: list[str | None], right: list[str]) -> tuple[float, float]:
    """The share of right answers (an unreadable one is wrong) and the share of unreadable ones."""
    given = np.array([a == r for a, r in zip(answers, right)], dtype=float)
    return float(given.mean()), float(np.mean([a is None for a in answers]))
