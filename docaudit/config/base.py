"""The package's paths, the choices of the options, and how a field becomes an option (``setting``)."""

from __future__ import annotations

import numbers
from dataclasses import field
from pathlib import Path

from docaudit.errors import DocauditError

# The shipped classifier and manifests live at the repository's top level (models/, data_manifests/); the links in
# docaudit/_shipped/ point there, so the same paths work in a checkout and, as package data, in a wheel.
PACKAGE_DIR = Path(__file__).resolve().parent.parent


DEFAULT_CLASSIFIER = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-pg"


# per-passage contrasts of never-seen texts, the embedded Gemma generator and target (scripts/controls_library.py)
CONTROLS_NULL = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-controls-null" / "library.json"


MANIFESTS_DIR = PACKAGE_DIR / "_shipped" / "data_manifests"


NORMS = ("none", "ratio_tf", "ratio_gp", "max_tf", "max_gp")


FEATURES = ("agg", "hist")


DTYPES = ("float32", "bfloat16", "float16")


QUANTIZE = ("int8", "int4")


EXCERPTS = ("random", "leading")


API_LOGPROBS = ("auto", "echo", "logit_bias")


API_TIMEOUT_MAX = 86400.0  # seconds: the longest --api-timeout accepted (a day)
API_RETRIES_MAX = 100


MAX_DOCUMENT_BYTES = 1 << 30  # a larger file is refused (one document is read and cleaned in memory)
# a zip archive from others (skops file, cache entry) may inflate to at most FLOOR + RATIO x its size in bytes
ARCHIVE_INFLATE_FLOOR = 64 << 20
ARCHIVE_INFLATE_RATIO = 40
READ_JOBS = -1  # processes that read and clean documents (joblib; -1: one per core)
READ_JOBS_MIN_FILES = 16  # fewer files are read in this process (starting workers would cost more)


# Sections of a command's help, in the order shown; "openai" holds what only the OpenAI-compatible backend reads
SECTIONS = ("inputs", "model", "query", "method", "target", "traps", "output", "openai")


def setting(default, help: str, section: str, **option):
    """A field that is also a command-line option: its ``help`` text and help ``section`` (one of ``SECTIONS``)
    beside its default, so the option is declared here once (docaudit/cli/options.py builds it). ``option`` may
    give the option's ``flag`` (default: ``--`` and the field's name), its ``choices`` and its former spellings
    ``aliases`` (hidden from the help, still read on the command line and in config files)."""
    if section not in SECTIONS:
        raise ValueError(f"unknown help section {section!r} (sections: {', '.join(SECTIONS)})")
    return field(default=default, metadata={"help": help, "section": section, **option})


# Upper bounds of the count options: far above any sensible run, low enough that no value allowed can exhaust
# memory before the work starts (``--bins 2000000000`` would allocate gigabytes per document)
MAX_BINS = 100_000
MAX_TREES = 100_000
MAX_FOLDS = 1_000
MAX_RESAMPLES = 1_000_000
MAX_SEQUENCES = 100_000  # sequences per document (document-level scaling)
MAX_SNIPPETS = 100_000
MAX_WORDS = 1_000_000
MAX_TOKENS = 1 << 30  # tokens of a document, an excerpt or a window
MAX_BATCH = 65_536
MAX_COPIES = 10_000  # augmented copies, neighbours, traps and trap copies per document
MAX_SPLITS = 100_000


def check_count(option: str, value, lo: int, hi: int, note: str = "") -> None:
    """:func:`check_range` for a count: also refuses what is not an integer (a float or a string from a config
    file)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise DocauditError(f"{option} {value!r} is not a whole number: allowed {lo}..{hi}")
    check_range(option, value, lo, hi, note)


def check_range(option: str, value: float, lo: float, hi: float | None = None, note: str = "") -> None:
    """Refuse ``value`` outside ``lo..hi`` (``hi=None``: no upper bound) with a one-line error naming the option
    and the allowed range (``note`` says where the bound comes from)."""
    if value != value or value < lo or (hi is not None and value > hi):  # NaN is out of every range
        allowed = f"{lo}..{hi}" if hi is not None else f"{lo} or more"
        raise DocauditError(f"{option} {value} is out of range: allowed {allowed}{f' ({note})' if note else ''}")
