"""The Detector: scores sequences with the selected methods, running each extra pass once per text through
cached queriers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
from tqdm.auto import tqdm

from docaudit.config import SEED, DetectorConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.neighborhood import MaskedNeighbors, load_masked_lm
from docaudit.methods.detectors.registry import METHODS, PASSES, View, check_served, resolve_methods
from docaudit.query.models import LoadedModel, load_model
from docaudit.query.querier import Pool, Querier, single_pass_context
from docaudit.run import ModelSpec

EXTRA_BLOCK = 256  # sequences whose extra passes are queried together


class Detector:
    """Scores sequences with the selected methods, running each needed extra pass once per sequence text.

    ``target`` queries the full texts (``score_text``) and every target-model extra pass; ``ref`` the reference
    model (method ``ref``); ``neighbors`` makes the Neighborhood texts; ``frequencies`` are the token frequencies
    of a reference corpus (method ``dcpdd``, :func:`token_frequencies`). Extra-pass texts go through the queriers'
    caches like documents."""

    def __init__(
        self,
        target: Querier,
        methods: Sequence[str] | str | None = None,
        config: DetectorConfig = DetectorConfig(),
        ref: Querier | None = None,
        neighbors: MaskedNeighbors | None = None,
        frequencies: np.ndarray | None = None,
    ):
        self.methods = resolve_methods(methods, ref is not None, neighbors is not None, target.backend.name)
        check_served(self.methods, target.backend.name)
        if ref is not None and "ref" in self.methods:
            check_served(["ref"], ref.backend.name)
        self.target, self.ref, self.neighbors, self.config = target, ref, neighbors, config
        self.frequencies = frequencies
        if "ref" in self.methods and ref is None:
            raise DocauditError("method 'ref' needs a reference model (--ref-model)")
        if "neighbor" in self.methods and neighbors is None:
            raise DocauditError("method 'neighbor' needs a masked language model (--neighbor-model)")
        self.passes = list(dict.fromkeys(p for m in self.methods for p in METHODS[m].passes))

    @property
    def needs_text(self) -> bool:
        """Whether a selected method reads the sequence's text (then ``score`` needs it)."""
        return any(METHODS[m].needs_text for m in self.methods)

    def extra(self, text: str) -> dict[str, list[np.ndarray]]:
        """The log-probabilities of every extra pass over ``text``."""
        return self.extras([text])[0]

    def extras(self, texts: Sequence[str]) -> list[dict[str, list[np.ndarray]]]:
        """The log-probabilities of every extra pass over each of ``texts``: the texts a pass derives from all of
        them are queried together (``Querier.stats_many``, their windows batched), a few forward passes per pass
        rather than one per text."""
        out: list[dict[str, list[np.ndarray]]] = [{} for _ in texts]
        for name in self.passes:
            spec = PASSES[name]
            querier = self.ref if spec.model == "ref" else self.target
            derived = [spec.texts(self, text) for text in texts]
            stats = iter(querier.stats_local([(t, None) for ts in derived for t in ts], progress=False))
            for row, ts in zip(out, derived):
                row[name] = [next(stats).logp for _ in ts]
        return out

    def on_pool(self, pool: Pool | None) -> Detector:
        """This detector with its queriers (target, reference model) sending their queries to ``pool`` (Ray
        workers: ``distributed.scale_out``; None: this process)."""
        for querier in (self.target, self.ref):
            if querier is not None:
                querier.pool = pool
        return self

    def prefetch(self, texts: Sequence[str], progress: bool = True) -> None:
        """With a pool (:meth:`on_pool`), query the extra passes of all ``texts`` on its workers at once, into the
        queriers' caches that :meth:`extra` reads; otherwise nothing. The neighbourhood pass is left to
        :meth:`extra`: its texts come from a masked LM, made once."""
        for name in self.passes:
            if name != "neighbor":
                querier = self.ref if PASSES[name].model == "ref" else self.target
                querier.prefetch([(t, None) for text in texts for t in PASSES[name].texts(self, text)], progress)

    def score(
        self,
        logp: np.ndarray,
        mu: np.ndarray,
        sigma: np.ndarray,
        text: str | None = None,
        targets: np.ndarray | None = None,
        extra: dict[str, list[np.ndarray]] | None = None,
    ) -> dict[str, float]:
        """Scores of one sequence given the target's arrays over it (and its text when a method needs it; the
        scored token ids for ``dcpdd``; its extra passes when already queried, :meth:`extras`)."""
        if text is None and self.needs_text:
            raise DocauditError(f"methods {', '.join(m for m in self.methods if METHODS[m].needs_text)} need the text")
        if extra is None:
            extra = self.extra(text) if self.passes else {}
        view = View(logp, mu, sigma, text, extra, targets, self.frequencies)
        return {m: float(METHODS[m].score(view, self.config)) for m in self.methods}

    def score_many(self, sequences: Iterable[Sequence], progress: bool = False, desc: str = "scoring") -> list[dict]:
        """:meth:`score` of each ``(logp, mu, sigma, text, targets)``, the extra passes of ``EXTRA_BLOCK``
        sequences at a time queried together (:meth:`extras`)."""
        sequences = list(sequences)
        rows: list[dict] = []
        with tqdm(total=len(sequences), desc=desc, unit="seq", disable=not progress) as bar:
            for lo in range(0, len(sequences), EXTRA_BLOCK):
                block = sequences[lo : lo + EXTRA_BLOCK]
                extras = self.extras([seq[3] for seq in block]) if self.passes else [{}] * len(block)
                rows += [self.score(*seq, extra=extra) for seq, extra in zip(block, extras)]
                bar.update(len(block))
        return rows

    def score_text(self, text: str, sha256: str | None = None) -> dict[str, float]:
        """Scores of a text over all its windows' tokens (one forward pass when it fits one window)."""
        stats = self.target.stats(text, sha256)
        return self.score(stats.logp, stats.mu, stats.sigma, text, stats.targets)

    def set_frequencies(self, texts: Sequence[tuple[str, str | None]]) -> None:
        """Token frequencies of a reference corpus (``(text, sha256 or None)`` pairs) in the target's tokenization,
        for method ``dcpdd``."""
        from docaudit.io import sha256_text
        from docaudit.methods.meta.normalize import token_frequencies

        ids = [self.target.token_ids(t, sha or sha256_text(t)) for t, sha in texts]
        self.frequencies = token_frequencies(ids, self.target.lm.vocab_size)


def build_detector(
    lm: LoadedModel,
    query: QueryConfig,
    methods: Sequence[str] | str | None = None,
    config: DetectorConfig = DetectorConfig(),
    models: ModelSpec = ModelSpec(),
    cache: bool = True,
    single_pass: int | None = None,
    *,
    seed: int = SEED,
) -> Detector:
    """A Detector over ``lm`` whose queriers (target, and the reference model ``models.ref_model`` when given) use
    ``query`` without GP sums (detectors do not use them) and the run's ``seed`` (excerpts, PAC's and the
    neighbours' draws); ``models.neighbor_model`` makes the neighbour texts. Each querier checks the query against
    its model: a context beyond the model's positions is refused, never changed. With ``single_pass=cap`` the
    context is derived instead: the longest window every model takes (:func:`single_pass_context`, at most
    ``cap``), with stride C-1 and no excerpt, so that a text that fits is scored in one forward pass."""
    from docaudit.query.cache import StatsCache

    ref_model, neighbor_model = models.ref_model, models.neighbor_model
    ref = None if ref_model is None else ref_model if isinstance(ref_model, LoadedModel) else load_model(ref_model)
    if single_pass is not None:
        context = min(single_pass_context(m, single_pass) for m in (lm, ref) if m is not None)
        query = replace(query, context=context, stride=None, max_tokens=None)
    query = replace(query, gp=False)
    neighbors = neighbor_model
    if isinstance(neighbor_model, str):
        neighbors = load_masked_lm(neighbor_model, config, lm.config.device, seed)
    return Detector(
        Querier(lm, query, StatsCache() if cache else None, seed=seed),
        methods,
        config,
        None if ref is None else Querier(ref, query, StatsCache() if cache else None, seed=seed),
        neighbors,
    )
