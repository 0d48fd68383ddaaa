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


# per-passage contrasts of never-seen texts, the embedded Gemma generator and target
# (scripts/artifacts/controls_library.py)
CONTROLS_NULL = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-controls-null" / "library.json"


# extraction figures of never-seen texts through the embedded Gemma (scripts/artifacts/extract_library.py)
EXTRACT_NULL = PACKAGE_DIR / "_shipped" / "models" / "gemma3-270m-extract-null" / "library.json"


MANIFESTS_DIR = PACKAGE_DIR / "_shipped" / "data_manifests"


NORMS = ("none", "ratio_tf", "ratio_gp", "max_tf", "max_gp")


FEATURES = ("agg", "hist")


DTYPES = ("float32", "bfloat16", "float16")


QUANTIZE = ("int8", "int4")


EXCERPTS = ("random", "leading")


API_LOGPROBS = ("auto", "echo", "logit_bias")
LLAMA_REPACK = ("auto", "on", "off")  # llama.cpp's repacked weight buffers: off on CPUs with AMX under auto


API_TIMEOUT_MAX = 86400.0  # seconds: the longest --api-timeout accepted (a day)
API_RETRIES_MAX = 100


MAX_DOCUMENT_BYTES = 1 << 30  # a larger file is refused (one document is read and cleaned in memory)
# a zip archive from others (skops file, cache entry) may inflate to at most FLOOR + RATIO x its size in bytes
ARCHIVE_INFLATE_FLOOR = 64 << 20
ARCHIVE_INFLATE_RATIO = 40
# The most bytes a file docaudit reads may hold, per kind of file (docaudit/untrusted.py, the one reader of files):
# the size is checked before a byte is read (a sparse file is refused unread) and counted again while reading
READ_LIMITS = {
    "document": MAX_DOCUMENT_BYTES,  # a document, a data set, a ReCaLL prefix
    "manifest": 256 << 20,  # a book list or catalog (CSV)
    "config": 1 << 20,  # a --config file is a few lines
    "card": 4 << 20,  # a classifier's card.json
    "classifier": 512 << 20,  # classifier.skops (the shipped one: 1 MB)
    "conformal": 512 << 20,  # conformal.skops
    "folds": 2 << 30,  # folds.skops and blind_folds.skops (the shipped ones: 5.5 and 2.6 MB)
    "registry": 64 << 20,  # a traps registry
    "output marker": 64 << 20,  # .docaudit-output.json lists every file of a folder
    "staging marker": 1 << 16,  # .docaudit-staging.json names a process
    "controls entry": 64 << 20,  # a `controls` cache entry: passages and their synthetic suffixes
    "lab record": 16 << 20,  # a lab target's docaudit_target.json, a checkpoint's state
    "checkpoint": 64 << 30,  # a lab checkpoint's tensors
    "statistics": 16 << 30,  # a TokenStats cache entry (.npz)
    "rates": 1 << 16,  # a measured rate in the cache
    "memo": 256,  # a weights-hash memo holds one hex digest
    "conversion record": 1 << 20,  # lists a converted model's few files
    "tokenizer config": 1 << 20,  # a converted model's tokenizer_config.json: its special tokens and class
    "weights": 1 << 40,  # model weights, only ever hashed a chunk at a time
    "plot": 64 << 20,  # a PNG docaudit drew, embedded in a page
    "kernel value": 1 << 12,  # a number the kernel shows as a file (a cgroup's memory limit)
    "generations entry": 64 << 20,  # a cached answer of a server (`probe`): one text
    "extraction entry": 16 << 20,  # `extract`'s log p_z of 256 examples (a few KB)
    "paraphrases": 32 << 20,  # a user's DE-COP paraphrases (JSON lines; also PARAPHRASE_MAX_LINES, _LINE_BYTES)
    "controls library": 64 << 20,  # a stored null library of `controls`: per-passage contrasts of a few dozen texts
    "extraction library": 64 << 20,  # a stored library of `extract`: a few hundred bytes of figures per text
    "cpu list": 16 << 20,  # /proc/cpuinfo: a few hundred KB on the largest machines
    "crash dump": 1 << 22,  # the fault-handler dump of a crashed command (every thread's stack: a few KB)
}
PARAPHRASE_MAX_LINES = 20_000  # lines of a DE-COP paraphrase file: a few passages of each text probed
PARAPHRASE_LINE_BYTES = 4 << 20  # one line of it: a passage and three paraphrases (some 150,000 words each)
CACHE_SCAN_LIMIT = 100_000  # files of others under the cache folder `cache info` counts before it stops
MIN_FREE_BYTES = 64 << 20  # free space the cache folder and an output folder's disk need before a run starts
CONFIG_MAX_KEY_PARTS = 32  # dotted parts of one key (or section name) in a --config file
CONFIG_YAML_CHARACTERS = 128 << 10  # a YAML --config file: PyYAML parses about 60 KB a second, in pure Python
CONFIG_MAX_DEPTH = 32  # tables, arrays, mappings or lists open at once in a --config file
# A zip archive (skops file) holds at most this many members, and at most FLOOR + its size / BYTES_PER_MEMBER
# (a forest's member holds an array: the shipped classifier about 370 bytes each, an empty member about 90); counted
# from its end record before its directory is parsed (a million members cost a gigabyte and half a minute to list)
ARCHIVE_MAX_MEMBERS = 500_000
ARCHIVE_MEMBERS_FLOOR = 10_000
ARCHIVE_BYTES_PER_MEMBER = 256
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
