"""Rules that tie an option to the inputs it is used on, checked by every command the same way (and, on the
command line, before any model is loaded), and the documented rates that ``--dry-run`` and the start line estimate a
run's time from when the cache holds no recent measurement of this machine (``docaudit.query.rates``)."""

from __future__ import annotations

from docaudit.errors import DocauditError

# Scored tokens per second of the querier on the embedded Gemma-3-270M on a 2-core CPU, every statistic: the rate
# a ``--dry-run`` estimate states until a real run has measured this machine's. 163 by
# ``scripts/benchmarks/bench_commands.py --issue-sizes`` (one long document, load average 1.8; docs/benchmarks.md,
# "Estimates against actual runs"); an earlier idle machine measured 366 ("transformers querier vs the raw forward"):
# the lower is kept, so that a first estimate errs long. llama.cpp: "llama.cpp K/V cache precision". A served model
# (--backend openai) has none.
QUERY_TOKENS_PER_SECOND = {"transformers": 163.0, "llamacpp": 321.0}
# Seconds to load the embedded model once converted (docs/benchmarks.md, "Estimates against actual runs": 5.1 and
# 5.8 s; 10.5 s earlier); the first use of a GGUF file converts it once, which takes longer and is never kept as
# the load time (``query.rates.one_time``).
LOAD_SECONDS = {"transformers": 10.5, "llamacpp": 3.0, "openai": 0.5}
# Seconds per GB of GGUF file of its conversion to safetensors on its first use with the transformers backend: the
# embedded Gemma's (253 MB) first load took 115 s from a fresh clone on a 2-core machine (its file assembled,
# dequantized and written), kept until this machine has measured its own.
CONVERT_SECONDS_PER_GB = 455.0
# Seconds of the first read of the embedded GGUF file's tokenizer (262,144 entries) by transformers, on its first
# load through llama.cpp (kept in the cache after): 71 s (17 CPU-s) at load average 7 on the shared 2-core machine
# (docs/benchmarks.md, "llama.cpp rows side by side").
GGUF_TOKENIZER_SECONDS = 71.0
# Seconds per tree of the meta-classifier's random forests (fit and scoring, depth 5, a few dozen documents, 2 cores).
TREE_SECONDS = 0.0017
# Seconds per token of a command's model passes of its work beside them, the passes, loading and the
# meta-classifier's forests (tokenizing, a detector's copies and scoring, blind baselines, bootstraps, outputs), by
# command (or variant, ``audit.costs.Shape.variant``), for a machine that measured none: the embedded Gemma's, as
# ``scripts/benchmarks/bench_commands.py --issue-sizes --scale 0.5`` measured them (docs/benchmarks.md, "At the issue's
# sizes"); ``controls`` (per generated and scored token) as ``scripts/benchmarks/bench_rest.py`` measured it on one book
# at --preset fast.
OTHER_SECONDS_PER_TOKEN = {
    "score": 1.8e-5,
    "sequence": 2.5e-4,
    "report": 5.9e-4,
    "evaluate": 1.6e-4,
    "controls": 2.5e-4,
}
# ``controls``' generated and scored tokens per second of wall time, for a machine that measured none: the embedded
# Gemma's (float32, one torch thread, the shared 2-core machine at load average 6-8; docs/benchmarks.md, "Estimates
# and the rest of controls and the main job").
CONTROLS_GENERATED_PER_SECOND = {"transformers": 44.0}
CONTROLS_SCORED_PER_SECOND = {"transformers": 114.0}
# ``extract``'s tokens per second (examples of 100 tokens and a BOS, every one run through the model) for a machine
# that measured none: the embedded Gemma's, float32, one torch thread on the shared 2-core CPU at load average
# 10-12, 84 tokens per second (docs/benchmarks.md, "Extraction"; ``scripts/benchmarks/bench_extract.py``); llama.cpp's
# not measured here: the same, so that a first estimate errs long.
EXTRACT_TOKENS_PER_SECOND = {"transformers": 84.0, "llamacpp": 84.0}
# A measurement in the cache older than this many days is not used (the machine or its load may have changed).
RATE_MAX_AGE_DAYS = 30
# Bytes of a UTF-8 file per token of the embedded model's tokenizer, for a token count estimated from file sizes
# without loading a tokenizer (``--dry-run``): 3.94 measured over 20 Project Gutenberg books (3.4 to 4.8 per book).
CHARS_PER_TOKEN = 4.0
# Trap generation by the embedded Gemma-3-270M on the shared 2-core CPU (``traps make --dry-run``; docs/traps.md,
# "Measured: the embedded Gemma on real books"): 32 candidates of 25 + 8 sampled tokens in batches of 16 took
# 641 s with the model's loading, 1.65 sampled tokens per second.
TRAP_SAMPLED_TOKENS_PER_SECOND = 1.65
# Seconds per generation request of ``probe`` for a server or model this machine has not measured: llama-cpp-python's
# server with the embedded Gemma on the shared 2-core CPU (load average 10), the default n-gram probe of one book,
# 64 continuations of at most 96 tokens in 570 s (docs/benchmarks.md, "Generation-only probes"); a hosted API's
# differ, and a real run records its own.
GENERATION_SECONDS_PER_REQUEST = 8.9
# Tokens per English word, for the snippets of ``report`` (given in words): an estimate of the same kind.
TOKENS_PER_WORD = 1.4


# Fewer test documents of a class than this in a fold make its AUC jump in steps of 1/n² and the spread over folds
# meaningless: evaluate warns (``audit.evaluation.small_folds_warning``).
MIN_FOLD_DOCUMENTS = 5


def check_folds(k: int, first: int, second: int, names: tuple[str, str] = ("members", "non-members")) -> None:
    """Refuse ``k`` folds (``--folds``) unless ``k >= 2`` and each class (``first`` and ``second`` documents, called
    ``names``) has at least ``k`` documents: the number of folds is never lowered silently."""
    if k < 2:
        raise DocauditError(f"need at least 2 folds, got {k} (--folds)")
    least = min(first, second)
    if least < k:
        advice = (
            f"each class needs at least {k}; add documents or use --folds {least}"
            if least >= 2
            else "cross-validation needs at least 2 documents of each class; add documents"
        )
        raise DocauditError(f"too few documents for {k} folds: {first} {names[0]} and {second} {names[1]} ({advice})")


def check_inner_folds(meta, k: int, first: int, second: int) -> None:
    """Refuse, before any query, a meta-classifier (``meta``, a MetaConfig) that chooses its normalization or
    features by an inner cross-validation when a training fold of ``k`` would hold fewer than ``meta.inner_folds``
    documents of a class (``first`` members, ``second`` non-members; a class of ``n`` leaves ``n - ceil(n / k)``
    in the smallest training fold): the same refusal the training would make after querying every document."""
    if len(meta.candidates()) < 2:
        return

    def least(folds: int) -> int:
        return min(n - -(-n // folds) for n in (first, second))

    if least(k) < meta.inner_folds:
        # more folds leave more documents to train on (the outer rule allows up to the smaller class)
        enough = [f for f in range(k + 1, min(first, second) + 1) if least(f) >= meta.inner_folds]
        more = f", use --folds {enough[0]}" if enough else ""
        raise DocauditError(
            f"too few documents for --norm/--features auto: the inner cross-validation needs {meta.inner_folds} "
            f"members and non-members in every training fold, and {k} folds of {first} members and {second} "
            f"non-members leave {least(k)} (add documents{more}, or name --norm and --features)"
        )
