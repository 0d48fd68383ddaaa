"""Document filters used to build manifests: length, English, publication years."""

from __future__ import annotations

import csv
import io
import logging
import os
import re
from collections.abc import Iterable, Mapping

from docaudit.corpus.documents import Document
from docaudit.errors import DocauditError
from docaudit.untrusted import open_untrusted

log = logging.getLogger(__name__)

STOPWORDS_EN = frozenset("the and of to a in that is was he it with for as his".split())


ENGLISH_MIN_SHARE = 0.15


_WORD_RE = re.compile(r"[a-z]+")


def word_count(text: str) -> int:
    """Whitespace-separated words: the length filter that needs no tokenizer."""
    return len(text.split())


def stopword_share(text: str, stopwords: frozenset[str] = STOPWORDS_EN) -> float:
    """Share of ``stopwords`` among the word tokens of the lowercased text (0 for a text without words)."""
    words = _WORD_RE.findall(text.lower())
    if not words:
        return 0.0
    return sum(w in stopwords for w in words) / len(words)


def is_english(text: str) -> bool:
    """The corpus README's check: share of 15 English function words above 0.15."""
    return stopword_share(text) > ENGLISH_MIN_SHARE


def _manifest_years(manifest) -> dict[str, int]:
    """``{id: publication year}`` from a manifest path, a mapping ``id -> row`` or an iterable of rows (mappings or
    objects with ``id`` and ``pub_year``)."""
    if manifest is None:
        return {}
    if isinstance(manifest, (str, os.PathLike)):
        with io.TextIOWrapper(open_untrusted(manifest, "manifest"), newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    elif isinstance(manifest, Mapping):
        rows = [dict(row, id=key) if isinstance(row, Mapping) else row for key, row in manifest.items()]
    else:
        rows = list(manifest)
    years = {}
    for row in rows:
        get = row.get if isinstance(row, Mapping) else (lambda k, r=row: getattr(r, k, None))
        value = get("pub_year")
        if value not in (None, ""):
            try:
                years[str(get("id"))] = int(float(value))
            except (TypeError, ValueError):
                raise DocauditError(f"manifest: bad pub_year {value!r} for id {get('id')}") from None
    return years


def filter_documents(
    docs: Iterable[Document],
    min_words: int | None = None,
    language: str | None = "en",
    years: tuple[int, int] | None = None,
    manifest: str | os.PathLike | Mapping | Iterable | None = None,
) -> tuple[list[Document], dict[str, str]]:
    """Keep the documents that pass every filter; returns ``(kept, skipped)`` with ``skipped = {id: reason}``.

    - ``min_words``: at least this many whitespace-separated words (the token-count filter lives with the model);
    - ``language``: ``"en"`` (stopword-share check) or None for no check;
    - ``years=(lo, hi)``: publication year within ``[lo, hi]``, read from ``manifest`` (path, mapping or rows with
      ``id`` and ``pub_year``); a document without a known year is kept.
    """
    if language not in (None, "en"):
        raise DocauditError(f"language filter: only 'en' is supported, got {language!r}")
    if years is not None:
        lo, hi = years
        if lo > hi:
            raise DocauditError(f"year range: {lo} > {hi}")
    pub_years = _manifest_years(manifest)
    kept, skipped = [], {}
    for doc in docs:
        reason = None
        if min_words is not None and (n := word_count(doc.text)) < min_words:
            reason = f"too short: {n} words < {min_words}"
        elif language == "en" and not is_english(doc.text):
            reason = f"not English: stopword share {stopword_share(doc.text):.3f} <= {ENGLISH_MIN_SHARE}"
        elif years is not None and doc.id in pub_years and not (years[0] <= pub_years[doc.id] <= years[1]):
            reason = f"published {pub_years[doc.id]}, outside {years[0]}-{years[1]}"
        if reason is None:
            kept.append(doc)
        else:
            skipped[doc.id] = reason
            log.info("skipping %s: %s", doc.id, reason)
    return kept, skipped
