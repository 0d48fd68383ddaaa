"""Raw per-document detector scores (the ``score`` command)."""

from __future__ import annotations

from dataclasses import replace

from docaudit.audit.costs import measured_run
from docaudit.config import QueryConfig
from docaudit.methods.detectors.detector import build_detector
from docaudit.provenance import Rows, document_records, model_record
from docaudit.query.models import LoadedModel, load_model
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext


@measured_run("score")
def score_documents(
    paths,
    models: ModelSpec = ModelSpec(),
    query: QueryConfig = QueryConfig(),
    detectors: DetectorSpec = DetectorSpec(),
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> list[dict]:
    """Raw per-document scores: ``[{"file", "n_tokens", "context", "stride", <method>: score, ...}]`` of the files
    ``paths`` (or of already loaded Documents). A document shorter than the context is one window, so its scores
    equal the sequence-level definitions; a longer one is scored over all its windows' tokens (and its extra passes
    over all theirs). With ``query.max_tokens`` every method scores the document's excerpt
    (:func:`querier.excerpt`): its characters are the text scored, extra passes included. Documents that cannot be
    used are left out and recorded in ``reading.skips``; ``detectors.freq_corpus``: documents whose token
    frequencies calibrate DC-PDD (None: the scored documents' texts)."""
    from docaudit.audit.frequencies import set_reference_frequencies
    from docaudit.corpus.documents import Document, Skips, load_documents
    from docaudit.io import sha256_text
    from docaudit.query.querier import excerpt, queryable_documents, warn_floored

    skips = Skips() if reading.skips is None else reading.skips
    raw, normalize_chars, progress = reading.raw, reading.normalize_chars, run.progress
    docs = load_documents(paths, raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars)
    model = models.model
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    detector = build_detector(
        lm,
        replace(query, max_tokens=None),
        detectors.methods,
        detectors.detector,
        models,
        seed=run.seed,
    ).on_pool(run.pool)
    if query.max_tokens is not None:
        cut = [excerpt(lm.tokenizer, d.text, query.max_tokens, query.excerpt, run.seed, d.sha256) for d in docs]
        docs = [
            Document(d.id, d.path, d.text[c.start : c.end], sha256_text(d.text[c.start : c.end]))
            for d, c in zip(docs, cut)
        ]
    docs = [docs[i] for i in queryable_documents(detector.target, docs, skips)]
    set_reference_frequencies(detector, docs, detectors.freq_corpus, raw, normalize_chars, progress, skips)
    used = {"context": query.context, "stride": query.effective_stride}
    detector.target.prefetch([(d.text, d.sha256) for d in docs], progress)
    detector.prefetch([d.text for d in docs], progress)
    queried = detector.target.stats_many(
        [(d.text, d.sha256) for d in docs], len(docs), progress=progress, names=[str(d.path) for d in docs]
    )
    warn_floored(docs, queried)
    scores = detector.score_many(
        [(s.logp, s.mu, s.sigma, d.text, s.targets) for d, s in zip(docs, queried)], progress, "scoring"
    )
    floored = lm.config.backend == "openai"
    excerpted = query.max_tokens is not None
    tokens = {str(d.path): (s.n_tokens, None if excerpted else s.n_tokens) for d, s in zip(docs, queried)}
    rows = [
        {
            "file": d.path,
            "n_tokens": s.n_tokens,
            **used,
            **({"floored_logprobs": s.floored} if floored else {}),
            **row,
        }
        for d, s, row in zip(docs, queried, scores)
    ]
    return Rows(rows, document_records(docs, tokens=tokens), model_record(lm), run.seed)
