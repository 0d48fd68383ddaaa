"""Whether a generated text reads as prose in the language of the documents it would be published in.

Copyright traps are planted in a book that its author publishes, so a trap must not stand out as junk: a sequence
sampled from a language model's BOS is often web text (HTML, code, a special token of the tokenizer written out,
news in another language). :class:`ProseCheck` names the first problem a text has, or None:

- ``special token``: the text holds the string of one of the tokenizer's special or added tokens
  (``<start_of_image>``);
- ``paragraph break``: a blank line inside the text (a trap is planted as one paragraph; a continuation of a book
  that runs on past a paragraph picks up headings and page numbers);
- ``markup``: an HTML or XML tag, an entity, a web address, BBCode or wiki markup;
- ``code``: a line that starts like a program statement (``import``, ``def``, ``const`` ...), ``=>``, ``==``, a call
  ``name()``, or braces and semicolons denser than prose has them;
- ``characters``: too few letters among the non-space characters, too many digits, or symbols of code and markup;
- ``script``: letters of a script (Latin, Cyrillic, CJK ...) the documents do not use;
- ``language``: for documents in English (the stopword check of :mod:`docaudit.corpus.filters`), a text that is not.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from docaudit.corpus.filters import is_english

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
LETTER_SHARE = 0.75  # letters among the non-space characters of prose (English books: about 0.95)
DIGIT_SHARE = 0.05  # digits among the non-space characters
SYMBOL_SHARE = 0.01  # characters of code and markup among the non-space characters
SCRIPT_SHARE = 0.01  # a script the documents use holds at least this share of their letters
FOREIGN_SHARE = 0.02  # letters of other scripts a text may hold
PROFILE_CHARS = 200_000  # characters of each document read for its profile

_MARKUP_RE = re.compile(
    r"</?[A-Za-z][^<>\n]{0,200}>|</|/>|&(?:[a-z]+|#\d+|#x[0-9a-f]+);|https?://|www\.|\[/?[a-z]+\]|\[\[|\]\]|\{\{|\}\}",
    re.I,
)
_CODE_RE = re.compile(
    r"^\s*(?:import|from\s+\S+\s+import|def|class|function|const|let|var|return|public|private|package|using"
    r"|#include|#define|SELECT|print\()\b"
    r"|=>|==|!=|&&|\|\||::|\b[A-Za-z_]\w*\(\)|\b\w+\.\w+\(",
    re.M,
)
_CODE_PUNCTUATION = set("{};")
_SYMBOLS = set("{}[]<>|\\=_^~#$@*`+%")


def script_of(ch: str) -> str:
    """The script of a letter, from its Unicode name (``LATIN``, ``CYRILLIC``, ``CJK`` ...)."""
    return unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]


def _letters(text: str) -> list[str]:
    return [ch for ch in text if ch.isalpha()]


def special_strings(tokenizer) -> tuple[str, ...]:
    """The strings of a tokenizer's special and added tokens (what must never appear written out in a trap)."""
    found = set(getattr(tokenizer, "all_special_tokens", []) or [])
    get_added = getattr(tokenizer, "get_added_vocab", None)
    if callable(get_added):
        found |= set(get_added())
    return tuple(sorted(s for s in found if isinstance(s, str) and s.strip()))


@dataclass(frozen=True)
class ProseCheck:
    """The checks of the module docstring for documents of ``scripts`` (their letters' scripts) and ``language``
    (``"en"`` or None for no language check), against the tokenizer's ``special`` token strings."""

    scripts: frozenset[str]
    language: str | None = None
    special: tuple[str, ...] = ()

    @classmethod
    def of(cls, texts: Iterable[str], special: Sequence[str] = ()) -> ProseCheck:
        """The check for traps published in ``texts``: the scripts that hold at least ``SCRIPT_SHARE`` of their
        letters, and English when the texts pass the English stopword check together."""
        sample = [t[:PROFILE_CHARS] for t in texts]
        counts = Counter(script_of(ch) for t in sample for ch in _letters(t))
        total = sum(counts.values())
        scripts = frozenset(s for s, c in counts.items() if total and c / total >= SCRIPT_SHARE)
        return cls(scripts, "en" if is_english("\n".join(sample)) else None, tuple(special))

    def problem(self, text: str) -> str | None:
        """The first problem of ``text`` (see the module docstring), or None when it reads as prose."""
        if any(s in text for s in self.special):
            return "special token"
        if _BLANK_LINE.search(text):
            return "paragraph break"
        if _MARKUP_RE.search(text):
            return "markup"
        chars = [ch for ch in text if not ch.isspace()]
        if not chars:
            return "characters"
        if _CODE_RE.search(text) or sum(ch in _CODE_PUNCTUATION for ch in chars) / len(chars) > 0.02:
            return "code"
        letters = _letters(text)
        if (
            len(letters) / len(chars) < LETTER_SHARE
            or sum(ch.isdigit() for ch in chars) / len(chars) > DIGIT_SHARE
            or sum(ch in _SYMBOLS for ch in chars) / len(chars) > SYMBOL_SHARE
        ):
            return "characters"
        if sum(script_of(ch) not in self.scripts for ch in letters) > FOREIGN_SHARE * len(letters):
            return "script"
        if self.language == "en" and not is_english(text):
            return "language"
        return None
