"""The generation-only probes' statistics against the authors' code (tests/reference_probes.py) on the same
texts: n-gram coverage and the creativity index to 1e-9 over real book passages and continuations built from them,
DE-COP's orders, prompts and per-book accuracy exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import corpus_ids, corpus_text

pytest.importorskip("nltk")
pytest.importorskip("sacremoses")
pytest.importorskip("unidecode")
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")

import reference_probes as ref  # noqa: E402

from docaudit.methods.probes import decop, ngram  # noqa: E402


def _generations(rng: np.random.Generator, continuation: str, other: str, n: int) -> list[str]:
    """Continuations a model could write: runs of the real continuation's words (some long, some short) between
    runs of another book's, with the other book's punctuation and curly quotes, and one of only the other book."""
    real, foreign = continuation.split(" "), other.split(" ")
    out = [other[:400]]
    for _ in range(n - 1):
        parts, i = [], int(rng.integers(0, 10))
        while len(parts) < 80 and i < len(real):
            take = int(rng.integers(1, 15))
            parts += real[i : i + take] if rng.random() < 0.6 else foreign[i : i + take]
            i += take + int(rng.integers(0, 4))
        out.append(" ".join(parts).replace("'", "\u2019"))
    return out


def _passages():
    """(real continuation, generations) of passages of real books."""
    rng = np.random.default_rng(7)
    books = corpus_ids("members", 6)
    for k, book in enumerate(books):
        text = corpus_text("members", book, start=30000 + 997 * k, n_chars=1600)
        other = corpus_text("members", books[(k + 1) % len(books)], start=41000, n_chars=1600)
        continuation = text[600:1400]
        yield continuation, _generations(rng, continuation, other, 5)


def test_coverage_and_creativity_match_the_authors_code():
    """Spans, the three coverages (plain and unique) and the creativity index over n = 2..12, for every generation;
    the texts cover from nothing to long copied runs."""
    seen = []
    for continuation, generations in _passages():
        ref_len = ref.reference_length(continuation)
        theirs = [ref.process_generation(g, continuation) for g in generations]
        for unique in (False, True):
            ci = ref.compute_modified_creativity_index(theirs, 2, 12, ref_len, unique)
            for g, t, c in zip(generations, theirs, ci):
                spans = ngram.match(g, continuation)
                assert [(s["start_index"], s["end_index"], s["span_text"]) for s in t["matched_spans"]] == list(
                    spans.spans
                )
                assert spans.ref_words == ref_len
                cov = ref.get_ngram_coverage(g, t["matched_spans"], 1, ref_len, unique)
                ours = ngram.coverage(spans, 1, unique)
                for key in ngram.LENGTHS:
                    assert ours[key] == pytest.approx(cov[f"coverages_{key}_length"], abs=1e-9)
                    assert ngram.creativity(spans, unique=unique)[key] == pytest.approx(
                        c[f"creativities_{key}_length"], abs=1e-9
                    )
                seen.append(ours["gen"])
    assert min(seen) == 0 and max(seen) > 0.5 and len(set(seen)) > 10  # the comparison covered a real range


def test_passage_statistic_aggregates_the_samples():
    continuation, generations = next(iter(_passages()))
    ref_len = ref.reference_length(continuation)
    theirs = [ref.process_generation(g, continuation) for g in generations]
    ci = [c["creativities_gen_length"] for c in ref.compute_modified_creativity_index(theirs, 2, 12, ref_len)]
    assert ngram.passage_statistic(generations, continuation) == pytest.approx(max(ci), abs=1e-9)
    assert ngram.passage_statistic(generations, continuation, aggregate="mean") == pytest.approx(np.mean(ci))
    cov = [
        ref.get_ngram_coverage(g, t["matched_spans"], 1, ref_len)["coverages_gen_length"]
        for g, t in zip(generations, theirs)
    ]
    assert ngram.passage_statistic(generations, continuation, "coverage") == pytest.approx(max(cov), abs=1e-9)


def test_a_generation_shorter_than_the_shortest_match_covers_nothing():
    spans = ngram.match("Yes indeed", "Yes indeed, said he.")
    assert spans.spans == () and ngram.coverage(spans)["gen"] == 0.0
    assert ngram.match("", "anything").n_words == 0


def test_decop_orders_prompts_and_accuracy_match_the_authors_code():
    """Every order (their row order and right letters), both prompts character for character, and the per-book
    accuracy of their ``calculate_accuracy`` over answers that are exactly a letter or something else."""
    texts = [corpus_text("members", b, start=25000, n_chars=300) for b in corpus_ids("members", 4)]
    frame = pd.DataFrame([texts + ["book", 1]], columns=[0, 1, 2, 3, "ID", "Label"])
    theirs = ref.generate_permutations(frame)
    ours = decop.ordered(texts[0], texts[1:])
    assert len(ours) == len(theirs) == 24
    rng = np.random.default_rng(3)
    answers = []
    for (options, right), (_, row) in zip(ours, theirs.iterrows()):
        assert options == [row["Example_A"], row["Example_B"], row["Example_C"], row["Example_D"]]
        assert right == row["True Answer"]
        chatgpt, claude = ref.query_prompts(options, "A Title", "An Author")
        assert decop.completion_prompt(options, "A Title", "An Author") == chatgpt
        assert decop.chat_prompt(options, "A Title", "An Author") == claude
        answers.append(str(rng.choice(["A", "B", "C", "D", " C\n", "none"])))
    theirs["answer"] = [a.strip() for a in answers]
    expected = theirs.apply(lambda row: ref.calculate_accuracy(row, "True Answer", "answer"), axis=1).mean()
    parsed = [decop.parse_answer(a) for a in answers]
    assert decop.accuracy(parsed, [r for _, r in ours])[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "answer, letter",
    [
        ("B", "B"),
        (" C.\n", "C"),
        ("(D)", "D"),
        ("Answer: A", "A"),
        ("**B**", "B"),
        ("The correct answer is C. The passage...", "C"),
        ("D. It was a dark night", "D"),
        ("a passage", None),
        ("I cannot tell", None),
        ("", None),
        ("E", None),
        ("Both A and B", None),
    ],
)
def test_decop_reads_the_letter_of_an_answer(answer, letter):
    assert decop.parse_answer(answer) == letter


def test_a_model_blind_to_the_options_is_right_in_a_quarter_of_the_orders():
    """Position bias cancels: any answer that ignores the options (a fixed letter, or any fixed sequence of letters
    over the orders of a passage) scores exactly 1/4 over the 24 orders."""
    right = [r for _, r in decop.ordered("v", ["p", "q", "r"])]
    for letter in decop.LETTERS:
        assert decop.accuracy([letter] * 24, right)[0] == decop.POSITION_FLOOR
    assert decop.accuracy([None] * 24, right) == (0.0, 1.0)
