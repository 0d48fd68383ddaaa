"""The trap experiment: train a target on trapped members and test it for the traps of every document.

Each document of the pool is cut to its leading ``target.doc_tokens`` tokens (under the tokenizer the target will
use: trained on the untrapped pool, or the base model's), gets ``2 * per_document`` generated sequences, and a
random half of them planted ``copies`` times (``audit.traps.make_traps``). The members are trained on with their
traps (published); the controls of every document, and the traps of the non-members, are never trained on. The
tokenizer is trained on the untrapped texts, so it carries no trace of the traps. Then every document is tested
(``audit.traps.detect_traps``): the members' p-values measure the power of the test, the non-members' its level
(their traps were never seen, so p < alpha should happen in at most a share alpha of them).
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from docaudit import __version__
from docaudit.audit.traps import TrapDetection, detect_traps, make_traps
from docaudit.config import ModelConfig, TargetConfig, TrapConfig
from docaudit.corpus.documents import Document
from docaudit.io import atomic_write_text, csv_text, json_text, sha256_text
from docaudit.lab.target import leading_token_ids, train_target
from docaudit.outputs import record_files
from docaudit.provenance import envelope
from docaudit.query.models import load_model
from docaudit.run import RunContext

TRAP_ENTRIES = ("traps-registry.json", "traps.json", "traps.csv")


@dataclass
class TrapLabResult:
    """What the trap experiment measured: the split, the target, the detection per document, and the seconds each
    step took."""

    out: pathlib.Path
    model_dir: pathlib.Path
    split: dict[str, int]
    detection: TrapDetection
    seconds: dict
    config: TrapConfig
    trained_tokens: int

    def rates(self) -> dict:
        """Per group (trained members, never-trained non-members): documents, the share with p < alpha, and the
        pooled AUC of every score."""
        out = {}
        alpha = self.config.alpha
        for name, flag in (("members", 1), ("nonmembers", 0)):
            rows = [r for r in self.detection.rows if self.split[r["document"]] == flag]
            out[name] = {
                "documents": len(rows),
                "p_below_alpha": float(np.mean([r["p_value"] < alpha for r in rows])) if rows else None,
                **{k: float(np.mean([r[k] for r in rows])) for k in (rows[0] if rows else {}) if k.startswith("auc_")},
            }
        return out

    def summary(self) -> dict:
        return {
            "docaudit_version": __version__,
            "traps": dataclasses.asdict(self.config),
            "model_dir": str(self.model_dir),
            "trained_tokens": self.trained_tokens,
            "seconds": self.seconds,
            "rates": self.rates(),
            "detection": self.detection.as_json(),
        }


def _leading_texts(texts: dict[str, str], target: TargetConfig, base_model: str | None) -> dict[str, str]:
    """Each text cut to its leading ``target.doc_tokens`` tokens (decoded) under the tokenizer the target gets."""
    if target.doc_tokens is None:
        return dict(texts)
    from transformers import AutoTokenizer

    from docaudit.lab.tokenizer import train_tokenizer

    tok = (
        AutoTokenizer.from_pretrained(base_model)
        if base_model
        else train_tokenizer(list(texts.values()), target.vocab_size)
    )
    return {
        b: tok.decode(leading_token_ids(tok, t, target.doc_tokens), skip_special_tokens=True) for b, t in texts.items()
    }


@dataclass(frozen=True)
class TrapPlan:
    """The copyright traps a lab plants in its documents: ``config``, the ``generator`` model that writes them, and
    ``sequences`` generated before, reused (None: generated here)."""

    config: TrapConfig = TrapConfig()
    generator: ModelConfig = ModelConfig()
    sequences: Any = None


def run_trap_lab(
    texts: dict[str, str],
    split: dict[str, int],
    out: pathlib.Path,
    target: TargetConfig,
    base_model: str | None,
    plan: TrapPlan,
    run: RunContext = RunContext(),
) -> TrapLabResult:
    """Plant the traps of ``plan`` in every document of ``texts``, train ``target`` on the trapped members, and
    test every document (see the module docstring); writes the registry, ``traps.json`` and ``traps.csv`` into
    ``out``."""
    import pandas as pd

    # from the BOS alone, as the authors: a lab's documents are its target's leading tokens, too short for passages
    traps, progress = replace(plan.config, context_tokens=0), run.progress
    seconds = {}
    t0 = time.perf_counter()
    cut = _leading_texts(texts, target, base_model)
    docs = [Document(b, f"{b}.txt", t, sha256_text(t)) for b, t in sorted(cut.items())]
    planted = make_traps(docs, plan.generator, traps, run.seed, progress, plan.sequences)
    planted.registry.write(out / "traps-registry.json")
    record_files(out, out / "traps-registry.json")
    seconds["plant"] = round(time.perf_counter() - t0, 1)
    by_id = {e.id: planted.texts[e.output] for e in planted.registry.documents}
    members = [by_id[b] for b in sorted(by_id) if split[b]]
    t0 = time.perf_counter()
    model_dir = train_target(
        members,
        [cut[b] for b in sorted(cut)],
        out / "target",
        dataclasses.replace(target, doc_tokens=None),
        base_model,
        run,
        on_epoch_end=lambda *_: record_files(out, out / "target" / "checkpoint"),
    )
    record_files(out, model_dir)
    seconds["train"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    lm = load_model(ModelConfig(model=str(model_dir)))
    detection = detect_traps(planted.registry, lm, alpha=traps.alpha, progress=progress)
    seconds["detect"] = round(time.perf_counter() - t0, 1)
    for row in detection.rows:
        row["trained"] = split[row["document"]]
    trained_tokens = sum(len(lm.tokenizer(t).input_ids) for t in members)
    result = TrapLabResult(out, model_dir, split, detection, seconds, traps, trained_tokens)
    atomic_write_text(out / "traps.json", json_text(envelope("lab", result.summary())))
    atomic_write_text(out / "traps.csv", csv_text(pd.DataFrame([*detection.rows, detection.overall])))
    record_files(out, out / "traps.json", out / "traps.csv")
    return result
