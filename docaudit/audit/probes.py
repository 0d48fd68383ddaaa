"""``probe``: was this book in the training data of a model that only writes text? Judged by what the model writes
about passages of the book against what it writes about texts it never saw (docs/methods.md, "Generation-only
probes").

Per text, up to ``passages`` passages across it (one at random in each of as many consecutive stretches of
``stretch_words`` words from a random offset, the same layout in every text):

- ``ngram``: the model continues each passage's opening ``samples`` times; each continuation's creativity index
  (or coverage) against the passage's real continuation (``methods.probes.ngram``), aggregated over the samples;
- ``decop``: the passage and three paraphrases (from the user's file, or written by a paraphrasing model) asked
  as a multiple-choice question in all 24 orders; the passage's share of right answers (``methods.probes.decop``).

The text's statistic is the mean over its passages. Its p-value ranks it against the null library's texts at
matched geometry (``inference.matched``): each library text that holds at least the book's ``k`` passages gives
the mean of ``k`` consecutive passages of its own, ``(1 + #{library texts at least as high}) / (n + 1)``, valid
when the book is a text like the library's under this probe, however its passages correlate along it (with a
paraphrase file, DE-COP's passages are the user's, in the file's order, and that holds only as far as the file's
passages are chosen alike in every text). Benjamini–Hochberg over the
run's books; without a library, the statistic and "inconclusive"."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from docaudit.audit.library_check import library_check, profile_of
from docaudit.config import PARAPHRASE_LINE_BYTES, PARAPHRASE_MAX_LINES, ProbeConfig
from docaudit.config.rules import TOKENS_PER_WORD
from docaudit.corpus.segments import stretch_starts
from docaudit.errors import DocauditError
from docaudit.inference.matched import matched_rank
from docaudit.inference.verdicts import Reason, nonmembers_needed, run_verdicts, smallest_p
from docaudit.methods.probes import decop, ngram
from docaudit.query.chat import Ask, Writer
from docaudit.seeds import stream

_WORD = re.compile(r"\S+")
_SPACES = re.compile(r"\s+")
_SPACES_AHEAD = re.compile(r"\s*")
NORMALIZE_PIECE = 1 << 16  # characters normalized at once
# the authors' prompt for an instruction-tuned model on BookMIA (src/generation/prompt_formatting.py,
# task_prompts_dict_book["bookMIA"]["instruct-autoregressive"][4]); a completion model gets the opening alone ([1])
NGRAM_INSTRUCTION = (
    "You will be shown part of a passage from a novel. Please try to generate the rest of the passage as accurately "
    "as possible. Do not generate any other text.\n\n"
)
PARAPHRASE_PROMPT = "{passage}\n\nThe same passage, said in other words:\n"
PARAPHRASE_TOKENS_PER_WORD = 1.5  # a paraphrase's most tokens per word of its passage
PARAPHRASE_TEMPERATURE = 1.0
NULL_IN_WORDS = {
    "ngram": "the model's continuations of this book's passage openings share no more exact word n-grams with the "
    "book's real continuations than its continuations of the null library's texts share with theirs",
    "decop": "the model picks this book's verbatim passages out of paraphrases no more often than it picks the "
    "null library's",
}
WHAT_EVIDENCE_MEANS = (
    "evidence means the model reproduces this book's text more than texts it never saw: training on the book is "
    "one cause; quotations of it elsewhere, common phrases, its fame, or a library of another era or kind are others"
)


@dataclass
class ProbedText:
    """One text's probe: its per-passage values, their mean (``statistic``), DE-COP's share of unreadable answers,
    the passage count it was compared at and the library texts long enough to hold its layout, its p-value, its
    model-free profile and blind p-value among the library's (``audit.library_check``), why it is inconclusive, and
    what it cost."""

    id: str
    path: str
    sha256: str
    name: str
    values: list[float] = field(default_factory=list)
    statistic: float | None = None
    unreadable: float | None = None
    compared_at: int | None = None
    library_texts: int | None = None
    p_value: float | None = None
    p_value_blind: float | None = None
    profile: list[float] | None = None
    reasons: list = field(default_factory=list)
    cost: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        out = asdict(self)
        out.pop("profile")
        out["reasons"] = [r.text if isinstance(r, Reason) else str(r) for r in self.reasons]
        return out


def windows(text: str, length: int, config: ProbeConfig, rng: np.random.Generator) -> list[tuple[int, list[int]]]:
    """Up to ``config.passages`` runs of ``length`` words across ``text``, one in each consecutive stretch of
    ``config.stretch_words`` words (``corpus.segments.stretch_starts``): each as its first word's index and the
    character offsets of its words' starts, with the end of its last word appended. Two passes over the words, the
    first counting them, the second keeping the offsets of the chosen runs only: memory is that of the runs, not of
    the text's words (a list of every word's offsets took 20 bytes per character)."""
    n = sum(1 for _ in _WORD.finditer(text))
    starts = stretch_starts(n, length, config.stretch_words, config.passages, rng)
    if not starts:
        return []
    wanted = {i for s in starts for i in range(s, s + length)}
    last = max(wanted)
    spans = {}
    for i, m in enumerate(_WORD.finditer(text)):
        if i in wanted:
            spans[i] = m.span()
        if i >= last:
            break
    return [(s, [spans[i][0] for i in range(s, s + length)] + [spans[s + length - 1][1]]) for s in starts]


def ngram_passages(text: str, sha256: str, config: ProbeConfig, seed: int) -> list[tuple[str, str]]:
    """(opening, real continuation) of each passage, drawn from the run's ``seed`` and the text."""
    rng = stream(seed, "probe_passages", int(sha256[:12], 16))
    p = config.prompt_words
    found = windows(text, config.passage_words, config, rng)
    return [(text[o[0] : o[p]].rstrip(), text[o[p] : o[-1]]) for _, o in found]


def ngram_values(writer: Writer, passages: list[tuple[str, str]], config: ProbeConfig, seed: int) -> list[float]:
    """Each passage's statistic over the continuations the model writes after its opening."""
    instruction = NGRAM_INSTRUCTION if writer.endpoint == "chat" else ""
    asks = [
        Ask(instruction + opening, config.samples, config.new_tokens, config.temperature, seed)
        for opening, _ in passages
    ]
    written = writer.write(asks)
    return [
        ngram.passage_statistic(texts, real, config.statistic, config.aggregate)
        for texts, (_, real) in zip(written, passages)
    ]


def _normalized(text: str) -> str:
    """``text`` with every whitespace run one space and its ends stripped (``" ".join(text.split())``), a piece
    of ``NORMALIZE_PIECE`` characters at a time (each cut moved past a whitespace run): memory of the result and one
    piece's words, not a list of the whole text's words (about 60 bytes per word of a long book)."""
    start, stop = _SPACES_AHEAD.match(text).end(), len(text)
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    out = []
    while start < stop:
        end = min(_SPACES_AHEAD.match(text, min(start + NORMALIZE_PIECE, stop)).end(), stop)
        out.append(_SPACES.sub(" ", text[start:end]))
        start = end
    return "".join(out)


def read_paraphrases(path) -> dict[str, list[str]]:
    """A user's paraphrases: JSON lines ``{"passage": TEXT, "paraphrases": [THREE TEXTS]}``, by the passage's
    words (spacing ignored); a line that is not such an object is a one-line error naming it. Bounded before and
    while reading, a line at a time: the file by ``READ_LIMITS["paraphrases"]`` (its size checked before a byte is
    read), each line by ``PARAPHRASE_LINE_BYTES`` and the lines by ``PARAPHRASE_MAX_LINES`` (a file of short lines
    makes some 500 bytes of objects per 45-byte line)."""
    from docaudit.untrusted import open_untrusted

    out = {}
    try:
        with open_untrusted(Path(path), "paraphrases") as f:
            for number, raw in enumerate(iter(lambda: f.readline(PARAPHRASE_LINE_BYTES + 1), b""), 1):
                if number > PARAPHRASE_MAX_LINES:
                    raise DocauditError(
                        f"the paraphrases {path} hold more than {PARAPHRASE_MAX_LINES:,} lines, the limit of a "
                        "paraphrase file (a few passages of each text)"
                    )
                if len(raw) > PARAPHRASE_LINE_BYTES:
                    raise DocauditError(
                        f"the paraphrases {path}, line {number}: more than {PARAPHRASE_LINE_BYTES:,} bytes, the "
                        "limit of a line (a passage and three paraphrases of it)"
                    )
                _paraphrase_line(raw.decode("utf-8"), path, number, out)
    except (OSError, UnicodeDecodeError) as e:
        raise DocauditError(f"cannot read the paraphrases {path}: {e}") from None
    return out


def _paraphrase_line(line: str, path, number: int, out: dict) -> None:
    """One line of a paraphrase file into ``out`` (see :func:`read_paraphrases`)."""
    if not line.strip():
        return
    try:
        item = json.loads(line)
        passage, given = item["passage"], item["paraphrases"]
        ok = isinstance(passage, str) and isinstance(given, list) and len(given) == 3
        ok = ok and all(isinstance(g, str) and g.strip() for g in given) and bool(passage.strip())
    except (ValueError, TypeError, KeyError, RecursionError):
        ok = False
    if not ok:
        raise DocauditError(
            f"{path}, line {number}: not a JSON object with a 'passage' and three non-empty 'paraphrases'"
        )
    out[_normalized(passage)] = [_normalized(g) for g in given]


def decop_passages(text: str, sha256: str, config: ProbeConfig, sources: dict, seed: int) -> list[tuple[str, list]]:
    """(passage, three paraphrases) of a text: the user's passages found in it (``sources["file"]``), else passages
    spread across it, paraphrased by ``sources["paraphraser"]`` (one whose paraphrases repeat it or each other, or are
    empty, is left out)."""
    if sources.get("file") is not None:
        flat = _normalized(text)
        found = [(p, g) for p, g in sources["file"].items() if p in flat]
        return found[: config.passages]
    rng = stream(seed, "probe_passages", int(sha256[:12], 16))
    passages = [_normalized(text[o[0] : o[-1]]) for _, o in windows(text, config.decop_words, config, rng)]
    paraphraser: Writer = sources["paraphraser"]
    tokens = int(np.ceil(config.decop_words * PARAPHRASE_TOKENS_PER_WORD))
    asks = [Ask(PARAPHRASE_PROMPT.format(passage=p), 3, tokens, PARAPHRASE_TEMPERATURE, seed) for p in passages]
    out = []
    for passage, written in zip(passages, paraphraser.write(asks)):
        given = [_normalized(w) for w in written]
        if all(given) and len({passage, *given}) == 4:
            out.append((passage, given))
    return out


def decop_values(writer: Writer, passages, title: str, author: str, config: ProbeConfig, seed: int):
    """Each passage's share of right answers over the 24 orders, and the text's share of unreadable answers."""
    prompt = decop.chat_prompt if writer.endpoint == "chat" else decop.completion_prompt
    asks, right = [], []
    for passage, paraphrases in passages:
        for options, letter in decop.ordered(passage, paraphrases):
            asks.append(Ask(prompt(options, title, author), 1, config.answer_tokens, 0.0, seed))
            right.append(letter)
    if writer.endpoint == "in-process":
        asks = [Ask(a.prompt, 1, a.max_tokens, max(config.temperature, 1e-3), seed) for a in asks]
    answers = [decop.parse_answer(row[0]) for row in writer.write(asks)]
    per = len(decop.ORDERS)
    values = [decop.accuracy(answers[i : i + per], right[i : i + per])[0] for i in range(0, len(answers), per)]
    return values, (decop.accuracy(answers, right)[1] if answers else None)


def probe_text(doc, writer: Writer, config: ProbeConfig, sources: dict, seed: int) -> ProbedText:
    """One text through the probe: its per-passage values and their mean, and its cost."""
    from docaudit.corpus.metadata import display_name

    began, sent, cached = time.monotonic(), writer.sent, writer.cached
    tokens = writer.prompt_tokens, writer.generated_tokens
    out = ProbedText(doc.id, str(doc.path), doc.sha256, display_name(doc.id, doc.title, doc.author))
    out.profile = profile_of(doc.text)
    if config.probe == "ngram":
        out.values = ngram_values(writer, ngram_passages(doc.text, doc.sha256, config, seed), config, seed)
    else:
        passages = decop_passages(doc.text, doc.sha256, config, sources, seed)
        title, author = doc.title or doc.id, doc.author or "an unknown author"
        out.values, out.unreadable = decop_values(writer, passages, title, author, config, seed)
        if out.unreadable is not None and out.unreadable > config.max_unreadable:
            out.reasons.append(
                Reason(
                    "unreadable_answers",
                    f"{out.unreadable:.0%} of the model's answers name no option (more than --max-unreadable "
                    f"{config.max_unreadable:g}): it does not answer in the format asked",
                )
            )
    if not out.values:
        out.reasons.append(
            Reason("too_few_passages", f"no passage of {config.passage_words} words could be probed in this text")
        )
    else:
        out.statistic = float(np.mean(out.values))
    out.cost = {
        "requests": writer.sent - sent,
        "cached": writer.cached - cached,
        "tokens_sent": writer.prompt_tokens - tokens[0],
        "tokens_received": writer.generated_tokens - tokens[1],
        "seconds": round(time.monotonic() - began, 3),
    }
    return out


def _floor_reason(library: list[ProbedText], config: ProbeConfig) -> Reason | None:
    """DE-COP's gate: the library's mean accuracy within ``floor_margin`` of the position-bias floor 1/4."""
    if config.probe != "decop" or not library:
        return None
    accuracy = float(np.mean([t.statistic for t in library]))
    if accuracy > decop.POSITION_FLOOR + config.floor_margin:
        return None
    return Reason(
        "model_cannot_answer",
        f"on the never-seen library texts the model is right in {accuracy:.1%} of the questions, at the "
        f"position-bias floor of 25% (within --floor-margin {config.floor_margin:g}): it does not read the options",
    )


_EMPTY_WHY = {
    "ngram": ": shorter than a passage",
    "decop": ": shorter than a passage, or, with --paraphrases, none of the file's passages in them",
}


def _too_few_compared(book: ProbedText, usable: int, config: ProbeConfig) -> Reason | None:
    """Why the book's rank cannot reach ``alpha``: too few library texts, or too few of them long enough to hold
    its layout; None when it can."""
    if book.library_texts is None or smallest_p(book.library_texts) < config.alpha:
        return None
    if book.library_texts < usable:
        return Reason(
            "library_too_short",
            f"only {book.library_texts} of the library's {usable} texts are long enough to hold the book's layout "
            f"({len(book.values)} passages, one in each of as many consecutive stretches of {config.stretch_words} "
            f"words), too few for a p-value below {config.alpha:g}; {nonmembers_needed(config.alpha)} would be "
            'needed (docs/methods.md, "Matched geometry")',
        )
    return Reason(
        "too_small_library",
        f"too few library texts: with {usable} the smallest p-value is 1/{usable + 1} = "
        f"{smallest_p(usable):.3g}, not below {config.alpha:g}; {nonmembers_needed(config.alpha)} would be needed",
    )


def judge(books: list[ProbedText], library: list[ProbedText] | None, config: ProbeConfig, seed: int) -> list:
    """p-values against the library at matched geometry (``inference.matched``), the gates' reasons, and the
    verdicts (Benjamini–Hochberg over the books that pass every gate)."""
    usable = [t for t in library or [] if t.statistic is not None and not t.reasons]
    if library is not None and len(usable) < config.min_library:
        empty = sum(1 for t in library if not t.values)
        raise DocauditError(
            f"the null library gave {len(usable)} usable texts, fewer than --min-library {config.min_library}"
            + (
                f" ({empty} of its {len(library)} texts had no passage to probe{_EMPTY_WHY[config.probe]})"
                if empty
                else ""
            )
        )
    floor = _floor_reason(usable, config)
    for b in books:
        if b.statistic is None:
            continue
        if library is None:
            b.reasons.append(Reason("no_library", "no null library: the statistic alone says nothing about membership"))
            continue
        rng = stream(seed, "probe_null", int(b.sha256[:12], 16))
        rank = matched_rank(b.values, [t.values for t in usable], rng, nonmembers_needed(config.alpha))
        b.p_value, b.library_texts = rank.p_value, rank.texts
        b.compared_at = rank.passages if rank.p_value is not None else None
        b.p_value_blind, differs = library_check(b.profile, [t.profile for t in usable if t.sha256 != b.sha256])
        b.reasons += [r for r in (floor, _too_few_compared(b, len(usable), config), differs) if r is not None]
    smallest = [smallest_p(b.library_texts) if b.p_value is not None else None for b in books]
    return run_verdicts([b.p_value for b in books], [b.reasons for b in books], None, config.alpha, smallest=smallest)


def probe_audit(docs, library_docs, writer: Writer, config: ProbeConfig, sources: dict, seed: int, progress=False):
    """Every text of ``docs`` and of the null library ``library_docs`` (None: none) probed; returns the books, the
    library, the verdicts, the null in words and the smallest p-value the library allows."""
    from tqdm.auto import tqdm

    every = list(docs) + list(library_docs or [])
    bar = tqdm(every, desc=f"probe {config.probe}", unit="text", disable=not progress)
    probed = []
    for doc in bar:
        probed.append(probe_text(doc, writer, config, sources, seed))
        bar.set_postfix(requests=writer.sent, cached=writer.cached)
    books, library = probed[: len(docs)], (probed[len(docs) :] if library_docs is not None else None)
    verdicts = judge(books, library, config, seed)
    usable = sum(1 for t in library or [] if t.statistic is not None and not t.reasons)
    return {
        "books": books,
        "library": library,
        "verdicts": verdicts,
        "null": f"H0: {NULL_IN_WORDS[config.probe]}; {WHAT_EVIDENCE_MEANS}",
        "smallest_p": None if library is None else smallest_p(usable),
        "writer": {
            "identity": writer.identity,
            "endpoint": writer.endpoint,
            "requests": writer.sent,
            "tokens_sent": writer.prompt_tokens,
            "tokens_received": writer.generated_tokens,
        },
    }


def planned_cost(texts: list[str], config: ProbeConfig, served: bool, seconds_per_request: float) -> dict:
    """What probing ``texts`` (books and library) takes at most, before anything is sent: requests, tokens sent
    and received (words counted here, ``TOKENS_PER_WORD`` tokens each; a DE-COP passage appears four times in each
    question), the time at ``seconds_per_request`` one request after another, and the price of the tokens when
    ``config`` gives prices. A cached answer is not asked again, so a resumed run takes less."""
    passages = sum(min(config.passages, len(_WORD.findall(t)) // config.passage_words) for t in texts)
    if config.probe == "ngram":
        requests = passages * config.samples
        prompt = config.prompt_words * TOKENS_PER_WORD + (len(NGRAM_INSTRUCTION.split()) if served else 0)
        received = requests * config.new_tokens
    else:
        requests = passages * len(decop.ORDERS)
        prompt = 4 * config.decop_words * TOKENS_PER_WORD + len((decop.INSTRUCTION + "Question: " * 4).split())
        received = requests * config.answer_tokens
    sent = int(round(requests * prompt))
    cost = {
        "texts": len(texts),
        "passages": passages,
        "requests": requests,
        "tokens_sent": sent,
        "tokens_received": received,
        "seconds": round(requests * seconds_per_request, 1),
        "price": None,
    }
    if config.price_prompt is not None or config.price_completion is not None:
        cost["price"] = sent * (config.price_prompt or 0.0) + received * (config.price_completion or 0.0)
    return cost
