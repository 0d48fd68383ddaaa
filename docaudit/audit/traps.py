"""Copyright traps, end to end: plant them in documents before publication, and test a model for them later.

``make_traps`` draws ``2 * per_document`` sequences per document from a generator (``query.generate``) and plants
half of them, chosen at random, in the document (``corpus.traps.plant``); the other half are the controls, never
published. ``detect_traps`` scores every trap and control on its own with docaudit's detectors (one forward pass
each: the authors score each sequence alone, ``src/utils.py`` ``compute_perplexity_df``):

- ``loss``: the mean log-probability of the sequence's tokens (higher = more member-like);
- ``minkpp``: Min-K%++ (Zhang et al. 2024);
- ``ref`` (with a reference model): ``L_ref - L_target``, the log of the authors' *ratio* attack (target
  perplexity over reference perplexity, lower = member: ``ratio_auc`` labels members 0), so the AUCs agree.

Per document, and over all documents pooled, it gives the AUC of traps against controls for each score and a
one-sided Mann–Whitney p-value for one score fixed in advance (``ref`` when a reference model is given, else
``loss``): under "the model never saw these traps" the traps and controls are exchangeable, because which were
published was decided at random, so the permutation distribution of the rank sum given the observed scores (ties
included, :mod:`docaudit.inference.permutation`) gives a p-value whose level is exact without any model of the
scores. ``p_value_method`` says whether it was counted exactly or, for very large pooled sets, estimated from
random splits. Verdicts use :mod:`docaudit.inference.verdicts` with Benjamini–Hochberg q-values over the
documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from docaudit.config import DetectorConfig, ModelConfig, QueryConfig, TrapConfig
from docaudit.corpus.traps import TrappedDocument, TrapRegistry, TrapSequence, check_id, passages, plant
from docaudit.errors import DocauditError
from docaudit.inference.permutation import RankTest, rank_sum_test, smallest_p
from docaudit.inference.verdicts import Verdict, bh_adjust, decide
from docaudit.provenance import model_record
from docaudit.query.models import LoadedModel, load_model
from docaudit.run import ModelSpec
from docaudit.seeds import stream


def mann_whitney(traps: Sequence[float], controls: Sequence[float]) -> RankTest:
    """The AUC of traps against controls (``U / (n_traps * n_controls)``, ties counted one half) and the one-sided
    permutation p-value of "traps score higher", exact given the observed scores, ties included
    (:func:`docaudit.inference.permutation.rank_sum_test`)."""
    return rank_sum_test(traps, controls)


@dataclass
class TrapPlan:
    """What ``make_traps`` made: the trapped text of each document (by output name) and the registry."""

    texts: dict[str, str]
    registry: TrapRegistry
    rejected: dict = field(default_factory=dict)
    candidates: int = 0


PASSAGE_CHARS_PER_TOKEN = 8  # characters of a passage per generator token wanted from it (a generous bound)
PASSAGES_PER_DOCUMENT = 64  # passages of a document the generator continues, in turn


def output_names(docs: Sequence) -> list[str]:
    """The file name of each document's trapped copy: its source file's name (``<id>.txt`` when two sources share
    one), each checked as a registry id and a file name (:func:`docaudit.corpus.traps.check_id`)."""
    for doc in docs:
        check_id(doc.id, "a document's id")
    names = [Path(d.path).name or f"{d.id}.txt" for d in docs]
    if len(set(names)) < len(names):
        names = [f"{d.id}.txt" for d in docs]
    if len(set(names)) < len(names):
        raise DocauditError("two documents have the same name; give each document a distinct file name")
    for name in names:
        check_id(name, "a trapped copy's file name")
    return names


def make_traps(
    docs,
    generator: ModelConfig | LoadedModel,
    config: TrapConfig,
    seed: int,
    progress: bool = False,
    sequences: Sequence[TrapSequence] | None = None,
) -> TrapPlan:
    """Generate ``2 * config.per_document`` sequences per document and plant a random half of them (seeded by the
    run's ``seed``) in each; ``docs`` are :class:`docaudit.corpus.documents.Document` read verbatim. Each output is
    named after its source file (``<id>.txt`` when two sources share a name). ``sequences``: sequences generated
    before by ``generator`` with ``config`` (``query.generate.generate_sequences``), used instead of new ones (the
    first ``2 * per_document * len(docs)``), so that experiments can vary the copies over the same sequences."""
    from datetime import datetime, timezone

    from docaudit import __version__
    from docaudit.corpus.prose import ProseCheck, special_strings
    from docaudit.query.generate import Generated, generate_sequences

    if not docs:
        raise DocauditError("no documents to plant traps in")
    names = output_names(docs)  # before any work: a name no folder can hold is refused at once
    lm = generator if isinstance(generator, LoadedModel) else load_model(generator)
    k = 2 * config.per_document
    rng = stream(seed, "traps")
    own_book = sequences is None and config.context_tokens > 0
    if own_book:  # each document's traps and controls written after passages of its own body
        prose = None if config.any_text else ProseCheck.of([d.text for d in docs], special_strings(lm.tokenizer))
        made = Generated([])
        for doc in docs:
            chars = config.context_tokens * PASSAGE_CHARS_PER_TOKEN
            found = passages(doc.text, PASSAGES_PER_DOCUMENT, chars, rng)
            if not found:
                raise DocauditError(
                    f"{doc.path}: no paragraph of its body follows {chars} characters to write traps after"
                )
            one = generate_sequences(lm, k, config, seed, progress, prose, found, kept=made.sequences)
            made.sequences += one.sequences
            made.rejected.update(one.rejected)
            made.candidates += one.candidates
    elif sequences is None:
        prose = None if config.any_text else ProseCheck.of([d.text for d in docs], special_strings(lm.tokenizer))
        made = generate_sequences(lm, k * len(docs), config, seed, progress, prose)
    elif len(sequences) < k * len(docs):
        raise DocauditError(f"{k * len(docs)} sequences needed for {len(docs)} documents, {len(sequences)} given")
    else:
        made = Generated(list(sequences[: k * len(docs)]))
    texts, entries = {}, []
    if own_book:  # a document's own sequences, in a random order (its traps and controls drawn from them)
        order = np.concatenate([j * k + rng.permutation(k) for j in range(len(docs))])
    else:
        order = rng.permutation(len(made.sequences))
    for j, (doc, name) in enumerate(zip(docs, names)):
        own = [made.sequences[i] for i in order[j * k : (j + 1) * k]]
        texts[name], entry = plant(doc.id, doc.path, doc.text, own, config.per_document, config.copies, rng, name)
        entries.append(entry)
    registry = TrapRegistry(
        generator={
            "model": lm.config.model or "embedded Gemma-3-270M",
            "identity": lm.identity,
            "tokenizer": lm.tokenizer_hash,
        },
        run_seed=seed,
        config=config.used(seed),
        documents=entries,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        docaudit_version=__version__,
    )
    return TrapPlan(texts, registry, dict(made.rejected), made.candidates)


def planting_estimate(sizes: dict[str, int], config: TrapConfig) -> dict:
    """What ``traps make`` would do to documents of ``sizes`` (name -> bytes), for ``traps make --dry-run``: per
    document the bytes its trap copies add (``per_document × copies`` paragraphs of ``tokens`` generator tokens at
    ``CHARS_PER_TOKEN`` characters each, and a blank line) and its growth; the sequences to generate; and the least
    time their sampling takes with the embedded generator, were every candidate kept, at the measured
    ``TRAP_SAMPLED_TOKENS_PER_SECOND``. The share of candidates kept depends on the generator and the documents (the
    prose check rejects most of what the embedded Gemma samples from its BOS), so no upper bound is given."""
    from docaudit.config.rules import CHARS_PER_TOKEN, TRAP_SAMPLED_TOKENS_PER_SECOND

    added = config.per_document * config.copies * (config.tokens * CHARS_PER_TOKEN + 2)
    rows = [
        {"document": name, "bytes": size, "added_bytes": int(added), "growth": added / size if size else math.inf}
        for name, size in sizes.items()
    ]
    sequences = 2 * config.per_document * len(sizes)
    sampled = sequences * (config.tokens + config.tokens // 4 + 2)
    return {
        "documents": rows,
        "traps": config.per_document * len(sizes),
        "sequences": sequences,
        "least_seconds": sampled / TRAP_SAMPLED_TOKENS_PER_SECOND,
    }


SCORES = ("loss", "minkpp", "ref")


@dataclass
class TrapDetection:
    """Per document and overall: the AUC of traps vs controls per score, the p-value of the primary score and the
    verdict. ``scores``: every sequence's scores (document, kind, text, generator perplexity, score per method)."""

    primary: str
    rows: list[dict]
    overall: dict
    scores: list[dict]
    model: dict | None = None  # the model tested (``provenance.model_record``)
    warning: str | None = None  # the model tested is the generator of the traps

    def as_json(self) -> dict:
        model = {"model": self.model} if self.model is not None else {}
        return {
            "primary_score": self.primary,
            "warning": self.warning,
            "overall": self.overall,
            "documents": self.rows,
            **model,
        }


def generator_warning(registry: TrapRegistry, lm: LoadedModel) -> str | None:
    """A warning when the model tested is the one that generated the registry's traps (same content identity): most
    often the default model, tested by mistake instead of the suspect."""
    if not registry.generator.get("identity") or registry.generator["identity"] != lm.identity:
        return None
    return (
        f"WARNING: the model tested is the generator of these traps ({registry.generator.get('model')}, same "
        "identity). The test holds its level, but it asks whether the generator was trained on the trapped "
        "documents: give the model you suspect with --model."
    )


def _summary(trap_scores: dict, control_scores: dict, methods: Sequence[str], primary: str) -> dict:
    row = {"n_traps": len(trap_scores[primary]), "n_controls": len(control_scores[primary])}
    for m in methods:
        row[f"auc_{m}"] = mann_whitney(trap_scores[m], control_scores[m]).auc
    test = mann_whitney(trap_scores[primary], control_scores[primary])
    row["p_value"], row["p_value_method"] = test.p_value, test.method
    return row


def detect_traps(
    registry: TrapRegistry,
    model: ModelConfig | LoadedModel,
    ref_model: ModelConfig | LoadedModel | None = None,
    detector: DetectorConfig = DetectorConfig(),
    alpha: float = TrapConfig.alpha,
    progress: bool = False,
) -> TrapDetection:
    """Score every trap and control of ``registry`` under ``model`` and test,
    per document and pooled, whether traps score higher than controls (see the module docstring)."""
    from tqdm.auto import tqdm

    from docaudit.methods.detectors.detector import build_detector

    lm = model if isinstance(model, LoadedModel) else load_model(model)
    methods = ["loss", "minkpp"] + (["ref"] if ref_model is not None else [])
    primary = "ref" if ref_model is not None else "loss"
    det = build_detector(
        lm, QueryConfig(), methods, detector, ModelSpec(ref_model=ref_model), single_pass=lm.max_positions or 2048
    )
    entries: list[TrappedDocument] = list(registry.documents)
    if not entries:
        raise DocauditError("no registry document to test")
    scores, rows = [], []
    pooled = {kind: {m: [] for m in methods} for kind in ("trap", "control")}
    total = sum(len(d.traps) + len(d.controls) for d in entries)
    with tqdm(total=total, desc="scoring traps", unit="seq", disable=not progress) as bar:
        for d in entries:
            per = {kind: {m: [] for m in methods} for kind in ("trap", "control")}
            for kind, seqs in (("trap", d.traps), ("control", d.controls)):
                for s in seqs:
                    if det.target.too_short(s.text) is not None:
                        raise DocauditError(f"{d.id}: a {kind} of fewer than 2 tokens under this model")
                    got = det.score_text(s.text)
                    scores.append({"document": d.id, "kind": kind, "text": s.text, "perplexity": s.perplexity, **got})
                    for m in methods:
                        per[kind][m].append(got[m])
                        pooled[kind][m].append(got[m])
                    bar.update()
            row = {"document": d.id, **_summary(per["trap"], per["control"], methods, primary)}
            floor = smallest_p(row["n_traps"], row["n_controls"])
            row["_reason"] = (
                f"with {row['n_traps']} traps and {row['n_controls']} controls no p-value can fall below {alpha}"
                if floor >= alpha
                else None
            )
            rows.append(row)
    q = bh_adjust([r["p_value"] for r in rows])
    for row, qv in zip(rows, q):
        verdict: Verdict = decide(row["p_value"], qv, alpha, inconclusive_reason=row.pop("_reason"))
        row.update(q_value=qv, verdict=verdict.verdict, reason=verdict.reason)
    overall = {"document": "(all)", **_summary(pooled["trap"], pooled["control"], methods, primary)}
    verdict = decide(overall["p_value"], None, alpha)
    overall.update(q_value=None, verdict=verdict.verdict, reason=verdict.reason)
    return TrapDetection(primary, rows, overall, scores, model_record(lm), generator_warning(registry, lm))
