"""The randomized controlled experiment: split, train, evaluate on the true labels."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from docaudit import __version__
from docaudit.config import ModelConfig, QueryConfig, TargetConfig
from docaudit.corpus.documents import Document
from docaudit.errors import DocauditError
from docaudit.io import atomic_write_text, json_text, sha256_text
from docaudit.lab.target import leading_token_ids, train_target
from docaudit.lab.traps import TRAP_ENTRIES, TrapLabResult, TrapPlan, run_trap_lab
from docaudit.provenance import envelope
from docaudit.query.models import LoadedModel, load_model
from docaudit.query.querier import open_querier, single_pass_context
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext
from docaudit.seeds import stream

if TYPE_CHECKING:
    from docaudit.audit.evaluation import MethodsEvaluation


def split_members(ids: list[str], seed: int, member_fraction: float = 0.5) -> dict[str, int]:
    """Assign each document id at random to the members (1) or non-members (0).

    Exactly ``round(member_fraction * len(ids))`` members; the result depends only on the set of ids and the
    seed (not on their order).
    """
    ids = [str(i) for i in ids]
    if len(set(ids)) != len(ids):
        raise DocauditError("document ids must be unique to split them into members and non-members")
    if not 0.0 < member_fraction < 1.0:
        raise DocauditError(f"member_fraction must be strictly between 0 and 1, got {member_fraction}")
    ordered = sorted(ids)
    n_members = int(round(member_fraction * len(ordered)))
    order = stream(seed, "lab_split").permutation(len(ordered))
    members = {ordered[i] for i in order[:n_members]}
    return {i: int(i in members) for i in ids}


def member_nonmember_loss(
    model: str | pathlib.Path | LoadedModel,
    member_texts: list[str],
    nonmember_texts: list[str],
    query: QueryConfig | None = None,
    cache: bool = True,
) -> dict:
    """Mean per-token loss (negative log-likelihood, nats) of the target on its members and on non-members, pooled
    over the tokens of each group; ``gap`` = non-member loss - member loss (positive when the model fits its
    members better).

    The texts are scored by docaudit's querier with ``query`` (by default the longest single window the model
    takes: ``single_pass_context``), exactly as ``evaluate`` and the Loss detector score them: the text's tokens
    without special tokens, windows of ``query.context`` tokens with a BOS before each window when the tokenizer
    uses one, every token but the first scored once. (Earlier versions scored the tokenizer's encoding, BOS
    included, in windows of all the model's positions without a BOS before the later windows; the first token of
    each text was then scored too.) A text of fewer than 2 tokens counts no token (its document loss is NaN).
    ``cache``: read and write the TokenStats cache, which ``evaluate`` on the same texts then reuses."""
    lm = model if isinstance(model, LoadedModel) else load_model(ModelConfig(model=str(model)))
    querier = open_querier(lm, query or QueryConfig(context=single_pass_context(lm)), cache=cache)

    def group(texts):
        per_doc = [
            querier.stats(t).logp if querier.too_short(t) is None else np.zeros(0, dtype=np.float32) for t in texts
        ]
        tokens = sum(len(v) for v in per_doc)
        loss = -float(sum(v.sum(dtype=np.float64) for v in per_doc) / tokens) if tokens else float("nan")
        return loss, [-float(v.mean()) if len(v) else float("nan") for v in per_doc], tokens

    m_loss, m_docs, m_tok = group(member_texts)
    n_loss, n_docs, n_tok = group(nonmember_texts)
    return {
        "member_loss": m_loss,
        "nonmember_loss": n_loss,
        "gap": n_loss - m_loss,
        "member_doc_losses": m_docs,
        "nonmember_doc_losses": n_docs,
        "member_tokens": m_tok,
        "nonmember_tokens": n_tok,
    }


@dataclass
class LabResult:
    """What ``run_lab`` measured: the split, the target, the loss gap, the evaluation on true labels and, when
    asked, the AUC per query precision."""

    out: pathlib.Path
    model_dir: pathlib.Path
    n_members: int
    n_nonmembers: int
    n_tokens: int
    loss: dict
    evaluation: MethodsEvaluation
    precisions: list[dict]

    def summary(self) -> dict:
        """What ``lab.json`` and ``--format json`` hold: counts, the target, the losses and every AUC."""
        table = self.evaluation.table
        return {
            "docaudit_version": __version__,
            "members": self.n_members,
            "nonmembers": self.n_nonmembers,
            "tokens": self.n_tokens,
            "model_dir": str(self.model_dir),
            "loss": self.loss,
            "blind_auc": self.evaluation.info["blind_auc"],
            "methods": table.to_dict(orient="records"),
            "precisions": self.precisions,
        }


# what run_lab writes in its folder (with traps: the target and the trap files)
LAB_ENTRIES = ("target", "members", "nonmembers", "evaluation", "lab.json", *TRAP_ENTRIES)


def _trained_documents(directory: pathlib.Path, texts: dict[str, str]) -> list[Document]:
    """The trained texts as Documents in file-name order (the order a folder is read in), each written to
    ``directory/<id>.txt`` as well: the lab's record of the split and of the exact text trained on, which other
    commands can read (``evaluate --raw``)."""
    docs = []
    for path, text in sorted((directory / f"{b}.txt", t) for b, t in texts.items()):
        atomic_write_text(path, text)
        docs.append(Document(path.stem, str(path), text, sha256_text(text)))
    return docs


@dataclass(frozen=True)
class LabSpec:
    """What a lab trains and evaluates: the ``target`` trained from scratch (or on top of ``base_model``), the
    ``methods`` evaluated on ``folds`` folds and again at the ``precisions`` given, at most ``max_docs`` documents of
    the pool (None: all), the pool cleaned with ``normalize_chars`` or not."""

    target: TargetConfig = TargetConfig()
    base_model: str | None = None
    methods: Sequence[str] | str | None = None
    folds: int = 5
    precisions: Sequence[str] = ()
    max_docs: int | None = None
    normalize_chars: bool = False


def run_lab(
    corpus: str | pathlib.Path,
    out: str | pathlib.Path,
    spec: LabSpec = LabSpec(),
    traps: TrapPlan | None = None,
    run: RunContext = RunContext(),
    overwrite: bool = False,
) -> LabResult | TrapLabResult:
    """A randomized controlled membership experiment. Split the documents of ``corpus`` at random (seeded by
    ``run.seed``) into members and non-members, train the target on the members (resumable), then evaluate
    the meta-classifier, the detectors and the blind baseline with the true labels on exactly the text the target was
    trained on: each document's leading ``target.doc_tokens`` tokens, decoded, passed to the evaluation as they are
    (and written to ``out/members`` and ``out/nonmembers``). The query windows are as long as the training blocks,
    less one position for the BOS put before each window. ``spec.precisions`` (e.g. ``["bfloat16", "int8",
    "int4"]``) re-query the same target at those precisions for the paper's Table-5 comparison. ``out`` is a new or
    empty folder or an earlier lab, resumed, or with ``overwrite`` discarded first (``outputs.prepare_output``).
    ``spec.normalize_chars`` cleans the pool with character normalization
    (:func:`docaudit.corpus.cleaning.clean_text`); the trained text is evaluated as it is, so it is never cleaned
    twice. With ``traps``, the members are trained on with those copyright traps planted in them, and every
    document is tested for its traps instead of evaluating the detectors (:mod:`docaudit.lab.traps`)."""
    from docaudit.audit.evaluation import EvaluationSpec, evaluate_methods
    from docaudit.corpus.documents import load_documents
    from docaudit.outputs import discard_output, prepare_output, read_marker, record_files, write_marker
    from docaudit.report.evaluation import write_evaluation

    target, base_model, methods, folds, progress = spec.target, spec.base_model, spec.methods, spec.folds, run.progress
    out = prepare_output(out, "lab", overwrite, [corpus, *([base_model] if base_model else [])], resume=True)
    docs = load_documents([corpus], progress=progress, normalize_chars=spec.normalize_chars)
    if overwrite:
        discard_output(out)
    out.mkdir(parents=True, exist_ok=True)
    write_marker(out, "lab", LAB_ENTRIES, (read_marker(out) or {}).get("files") or [])
    if spec.max_docs is not None:
        rng = stream(run.seed, "lab_subset")
        docs = [docs[i] for i in sorted(rng.choice(len(docs), size=min(spec.max_docs, len(docs)), replace=False))]
    texts = {d.id: d.text for d in docs}
    split = split_members(list(texts), seed=run.seed)
    if traps is not None:
        return run_trap_lab(texts, split, out, target, base_model, traps, run)
    members = [texts[b] for b in sorted(texts) if split[b]]
    model_dir = train_target(
        members,
        list(texts.values()),
        out / "target",
        target,
        base_model,
        run,
        on_epoch_end=lambda *_: record_files(out, out / "target" / "checkpoint"),
    )
    record_files(out, model_dir)

    lm = load_model(ModelConfig(model=str(model_dir)))
    tokenizer = lm.tokenizer
    trained = {
        b: tokenizer.decode(leading_token_ids(tokenizer, t, target.doc_tokens), skip_special_tokens=True)
        for b, t in texts.items()
    }
    trained_members = _trained_documents(out / "members", {b: t for b, t in trained.items() if split[b]})
    trained_nonmembers = _trained_documents(out / "nonmembers", {b: t for b, t in trained.items() if not split[b]})
    record_files(out, *(pathlib.Path(d.path) for d in trained_members + trained_nonmembers))
    # windows as long as the training blocks, less one position for a BOS before each window
    query = QueryConfig(context=single_pass_context(lm, cap=target.positions))
    loss = member_nonmember_loss(
        lm,
        [trained[b] for b in sorted(trained) if split[b]],
        [trained[b] for b in sorted(trained) if not split[b]],
        query,
    )
    raw = DocumentSpec(raw=True)
    evaluation = evaluate_methods(
        trained_members,
        trained_nonmembers,
        ModelSpec(lm),
        query,
        DetectorSpec(methods),
        EvaluationSpec(folds=folds),
        raw,
        run,
    )
    write_evaluation(evaluation, out / "evaluation", overwrite=True)
    record_files(out, out / "evaluation")
    columns = ["method", "level", "auc_mean", "auc_std"]
    baseline = evaluation.table[evaluation.table.method != "blind"][columns]
    rows = [{"precision": "float32", **r} for r in baseline.to_dict("records")] if spec.precisions else []
    for precision in spec.precisions:
        model = ModelConfig(
            model=str(model_dir), **({"quantize": precision} if precision in ("int8", "int4") else {"dtype": precision})
        )
        ev = evaluate_methods(
            trained_members,
            trained_nonmembers,
            ModelSpec(model),
            query,
            DetectorSpec(methods),
            EvaluationSpec(folds=folds, blind_kinds=None),
            raw,
            run,
        )
        rows += [{"precision": precision, **r} for r in ev.table[columns].to_dict("records")]
    result = LabResult(
        out,
        model_dir,
        int(sum(split.values())),
        int(len(split) - sum(split.values())),
        int(sum(len(tokenizer(t).input_ids) for t in trained.values())),
        loss,
        evaluation,
        rows,
    )
    atomic_write_text(out / "lab.json", json_text(envelope("lab", result.summary())))
    record_files(out, out / "lab.json")
    return result
