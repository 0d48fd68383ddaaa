"""The settings of the chapter map (``docaudit map``): how a book is cut, which detector scores each part, and when
a part is too short to be judged."""

from __future__ import annotations

from dataclasses import dataclass

from docaudit.config.base import check_range, setting

SEGMENT_METHODS = ("minkpp", "mink", "loss", "zlib")


@dataclass(frozen=True)
class LocalizeConfig:
    """A book cut into chapters (or runs of ``segment_words`` words), each scored by ``method`` from one pass over
    the whole book, each compared with windows of the same length at the same place in the calibration books."""

    method: str = setting(
        "minkpp", "The detector that scores each segment.", "method", flag="--method", choices=SEGMENT_METHODS
    )
    segment_words: int = setting(2000, "Words per segment for a book without chapter headings.", "method")
    min_segment_words: int = setting(
        300, "A chapter of fewer words is joined to the next one (tables of contents, short parts).", "method"
    )
    min_segment_tokens: int = setting(
        64, "A segment of fewer scored tokens is inconclusive (its score is too noisy to judge).", "method"
    )

    def __post_init__(self):
        check_range("--segment-words", self.segment_words, 50, 1_000_000)
        check_range("--min-segment-words", self.min_segment_words, 0, 1_000_000)
        check_range("--min-segment-tokens", self.min_segment_tokens, 2, 1_000_000)
