"""Sequence-level membership scores, every one oriented so that **higher = more member-like** (docs/methods.md,
"Sequence-level detectors").

A score is computed from a *view* of one sequence: the target model's per-token ``logp``, ``mu`` and ``sigma``
(TokenStats arrays, or a slice of them for one querier window), the sequence's text where a method needs it, and
the log-probabilities of the extra passes the method needs (texts derived from the sequence, queried through a
Querier and therefore cached like any document). With ``L(x) = -mean(logp)``, the cross-entropy loss in nats per
scored token of text ``x``:

- ``loss``: ``-L(x)``; ``zlib``: ``-L(x) / Z(x)``, ``Z`` the zlib-compressed size of the UTF-8 bytes;
  ``lowercase``: ``L(x.lower()) / L(x)``; ``ref``: ``L_ref(x) - L(x)``; ``mink``: Min-K% Prob; ``minkpp``:
  Min-K%++; ``pac``: ``mean_i PD(aug_i(x)) - PD(x)``; ``neighbor``: ``mean_j L(nb_j(x)) - L(x)``.

Each score function below says which file and function of its authors' public code it was checked against, and
how that code orients the score. Those scripts score a text with one forward pass of ``tokenizer.encode(text)``;
for a text that fits one window of the querier (fewer tokens than the context) docaudit's view is the same single
pass, so the scores are exactly the sequence-level definitions (one difference: with a tokenizer that puts a BOS
first, the authors' scripts also score the first text token, predicted from the BOS alone; docaudit does not
score it). A longer text is scored over all its windows' tokens (each window an independent pass,
docs/methods.md, "Querying").
"""
from __future__ import annotations

import hashlib
import logging
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .config import DetectorConfig, ModelConfig, QueryConfig
from .errors import DocauditError
from .lm import LoadedModel, load_model
from .querier import Querier, bos_per_window, max_positions

log = logging.getLogger(__name__)

SINGLE_PASS_CAP = 2048


# ---------------------------------------------------------------------------------------------------------------
# token-level building blocks


def n_of(share: float, n: int) -> int:
    """How many of ``n`` values a share selects: ``max(1, int(share * n))``."""
    return max(1, int(share * n))


def lowest_mean(values: np.ndarray, share: float) -> float:
    """Mean of the lowest ``max(1, int(share * n))`` values."""
    values = np.asarray(values, dtype=np.float64)
    k = n_of(share, len(values))
    return float(np.partition(values, k - 1)[:k].mean())


def highest_mean(values: np.ndarray, share: float) -> float:
    """Mean of the highest ``max(1, int(share * n))`` values."""
    return -lowest_mean(-np.asarray(values, dtype=np.float64), share)


def minkpp_tokens(logp: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Min-K%++ per token: ``(logp - mu) / sigma``, 0 where ``sigma == 0``."""
    logp, mu, sigma = (np.asarray(a, dtype=np.float64) for a in (logp, mu, sigma))
    out = np.zeros_like(logp)
    ok = sigma > 0
    out[ok] = (logp[ok] - mu[ok]) / sigma[ok]
    return out


def polarized_distance(logp: np.ndarray, k1: float, k2: float) -> float:
    """PAC's polarized distance: mean of the top ``k1`` share of ``logp`` minus mean of the bottom ``k2`` share
    (yyy01/PAC ``attack.py`` ``calculate_Polarized_Distance``: ``ratio_far = 0.05`` on top, ``ratio_local = 0.3``
    at the bottom, each at least one value)."""
    return highest_mean(logp, k1) - lowest_mean(logp, k2)


_SPACE = re.compile(r"(\s+)")


def text_seed(text: str) -> int:
    """A 48-bit integer from the text's SHA-256, so seeded augmentations depend on the text, not on call order."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def swap_words(text: str, n_swaps: int, rng: np.random.Generator) -> str:
    """``n_swaps`` random swaps of two words (whitespace-separated; whitespace is kept in place). Swap ``s``
    exchanges the words at positions ``a[s]`` and ``(a[s] + b[s]) % n`` with ``a = rng.integers(0, n, n_swaps)``
    and then ``b = rng.integers(1, n, n_swaps)``: two distinct positions, uniform over ordered pairs. A text of
    fewer than two words is returned unchanged."""
    parts = _SPACE.split(text)
    words = [i for i, p in enumerate(parts) if p and not p.isspace()]
    n = len(words)
    if n < 2 or n_swaps < 1:
        return text
    first = rng.integers(0, n, n_swaps)
    second = (first + rng.integers(1, n, n_swaps)) % n
    for a, b in zip(first, second):
        i, j = words[a], words[b]
        parts[i], parts[j] = parts[j], parts[i]
    return "".join(parts)


def pac_copies(text: str, config: DetectorConfig) -> list[str]:
    """PAC's augmented copies: copy ``c`` (0-based) makes ``max(1, int(pac_swap_ratio * n_words))`` swaps with
    ``np.random.default_rng([seed, c, text_seed(text)])``. As yyy01/PAC ``src/eda.py`` (``eda``, ``random_swap``:
    ``max(1, int(alpha * n_words))`` swaps of two random words per copy), except that words are whitespace runs
    kept in place (the authors split on single spaces) and that the two positions always differ and are seeded
    per text (the authors retry three times, then skip the swap, with a global seed)."""
    n_words = sum(1 for p in _SPACE.split(text) if p and not p.isspace())
    n_swaps = n_of(config.pac_swap_ratio, n_words)
    seed = text_seed(text)
    return [swap_words(text, n_swaps, np.random.default_rng([config.seed, c, seed])) for c in range(config.pac_copies)]


# ---------------------------------------------------------------------------------------------------------------
# Neighborhood: masked-LM neighbours


class MaskedNeighbors:
    """Neighbours of a text made with a masked language model (Mattern et al., simplified and deterministic):
    neighbour ``j`` masks ``max(1, int(mask_ratio * n))`` of the text's ``n`` masked-LM tokens at positions drawn
    with ``np.random.default_rng([seed, j, text_seed(text)])`` and puts at each the masked LM's most likely token
    other than the original one (special tokens excluded), all positions of one model input at once. Texts longer
    than the masked LM's input are processed in consecutive chunks."""

    def __init__(self, model, tokenizer, n: int = 5, mask_ratio: float = 0.15, seed: int = 0):
        if tokenizer.mask_token_id is None:
            raise DocauditError("the neighbour model's tokenizer has no mask token (need a masked language model)")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.n, self.mask_ratio, self.seed = n, mask_ratio, seed
        self.device = next(model.parameters()).device
        self.prefix, self.suffix = _special_wrap(tokenizer)
        limit = getattr(model.config, "max_position_embeddings", None) or 512
        # RoBERTa's positions start at 2: keep two positions spare
        self.chunk = max(1, min(limit, 512) - len(self.prefix) - len(self.suffix) - 2)
        self.banned = sorted(set(tokenizer.all_special_ids))

    def __call__(self, text: str) -> list[str]:
        import torch

        ids = np.asarray(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int64)
        if len(ids) == 0:
            return [text] * self.n
        m = min(len(ids), n_of(self.mask_ratio, len(ids)))
        seed = text_seed(text)
        positions = [np.random.default_rng([self.seed, j, seed]).choice(len(ids), size=m, replace=False)
                     for j in range(self.n)]
        variants = np.tile(ids, (self.n, 1))
        for lo in range(0, len(ids), self.chunk):
            hi = min(lo + self.chunk, len(ids))
            masks = [np.sort(p[(p >= lo) & (p < hi)]) for p in positions]
            if not any(len(p) for p in masks):
                continue
            rows = []
            for j in range(self.n):
                chunk = ids[lo:hi].copy()
                chunk[masks[j] - lo] = self.tokenizer.mask_token_id
                rows.append(self.prefix + chunk.tolist() + self.suffix)
            with torch.inference_mode():
                logits = self.model(input_ids=torch.tensor(rows, device=self.device)).logits.float()
                logits[..., self.banned] = -torch.inf
                for j in range(self.n):
                    if len(masks[j]):
                        z = logits[j, torch.as_tensor(masks[j] - lo + len(self.prefix), device=self.device)]
                        z[torch.arange(len(z)), torch.as_tensor(ids[masks[j]], device=self.device)] = -torch.inf
                        variants[j, masks[j]] = z.argmax(-1).cpu().numpy()
        return [self.tokenizer.decode(v.tolist(), clean_up_tokenization_spaces=False) for v in variants]


def _special_wrap(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after one sequence (e.g. ``[CLS]`` and ``[SEP]``)."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(plain) + 1):
        if full[i : i + len(plain)] == plain:
            return full[:i], full[i + len(plain):]
    return [], []


def load_masked_lm(spec: str, config: DetectorConfig = DetectorConfig(), device: str = "auto") -> MaskedNeighbors:
    """Load a masked LM (local Hugging Face directory or hub id) as a neighbour generator."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from .lm import resolve_device

    try:
        tokenizer = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForMaskedLM.from_pretrained(spec)
    except (OSError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DocauditError(f"unknown neighbour model '{spec}': could not be loaded as a masked LM ({reason})") from e
    model.to(resolve_device(device))
    return MaskedNeighbors(model, tokenizer, config.neighbors, config.neighbor_mask_ratio, config.seed)


# ---------------------------------------------------------------------------------------------------------------
# the registry


@dataclass
class View:
    """What a score is computed from: the target's per-token arrays of one sequence, its text (None when no
    selected method needs it) and the log-probabilities of each extra pass (pass name -> one array per text)."""

    logp: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    text: str | None = None
    extra: dict[str, list[np.ndarray]] = field(default_factory=dict)


def _loss(logp: np.ndarray) -> float:
    """Cross-entropy loss (nats per scored token) from log-probabilities."""
    return -float(np.mean(logp, dtype=np.float64))


@dataclass(frozen=True)
class Pass:
    """An extra pass: the texts it derives from a sequence's text, and which model queries them."""

    texts: Callable[["Detector", str], list[str]]
    model: str = "target"  # "target" | "ref"


PASSES: dict[str, Pass] = {
    "lower": Pass(lambda d, text: [text.lower()]),
    "pac": Pass(lambda d, text: pac_copies(text, d.config)),
    "ref": Pass(lambda d, text: [text], model="ref"),
    "neighbor": Pass(lambda d, text: d.neighbors(text)),
}


@dataclass(frozen=True)
class Method:
    """A detector: its name, display title, extra passes, whether it reads the text, and its score."""

    name: str
    title: str
    score: Callable[[View, DetectorConfig], float]
    passes: tuple[str, ...] = ()
    uses_text: bool = False

    @property
    def needs_text(self) -> bool:
        return self.uses_text or bool(self.passes)


def score_loss(v: View, c: DetectorConfig) -> float:
    """Loss attack: ``mean(logp) = -L(x)``. Checked against zjysteven/mink-plus-plus ``run.py`` (``scores['loss']
    = -loss``, larger = member) and swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``ppl = exp(L)``,
    negated by ``src/eval.py`` ``sweep``: lower perplexity = member)."""
    return -_loss(v.logp)


def score_zlib(v: View, c: DetectorConfig) -> float:
    """Zlib attack (Carlini et al. 2021): ``-L(x) / Z(x)`` with ``Z(x) = len(zlib.compress(x.encode("utf-8")))``,
    the compressed size in bytes of the UTF-8 encoding at zlib's default level. Checked against
    zjysteven/mink-plus-plus ``run.py`` (``ll / len(zlib.compress(bytes(text, 'utf-8')))``, larger = member),
    swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``log(ppl) / zlib_entropy``, negated by ``sweep``)
    and iamgroot42/mimir ``mimir/attacks/zlib.py`` (``loss / zlib_entropy``, negated by ``get_roc_metrics``).
    Always <= 0; for equal ``Z`` a lower loss gives a higher score."""
    return -_loss(v.logp) / len(zlib.compress(v.text.encode("utf-8")))


def score_lowercase(v: View, c: DetectorConfig) -> float:
    """Lowercase attack (Carlini et al. 2021): ``L(x.lower()) / L(x)`` (extra pass: the lowercased text); a
    memorized text has a low loss only in its original casing. Checked against zjysteven/mink-plus-plus
    ``run_ref.py`` (``ll_lowercase / ll``, larger = member) and swj0419/detect-pretrain-code ``src/run.py``
    ``inference`` (``-(log ppl_lower / log ppl)``, negated by ``sweep``)."""
    return _loss(v.extra["lower"][0]) / max(_loss(v.logp), 1e-12)


def score_ref(v: View, c: DetectorConfig) -> float:
    """Reference-model attack (Carlini et al. 2021): ``L_ref(x) - L(x)``, a difference of losses (each per token of
    its own model's tokenization, so the models need not share a tokenizer). Checked against
    zjysteven/mink-plus-plus ``run_ref.py`` (``ll - ll_ref``, larger = member), swj0419/detect-pretrain-code
    ``src/run.py`` ``inference`` (``L - L_ref``, negated by ``sweep``) and iamgroot42/mimir
    ``mimir/attacks/reference.py`` (``loss - ref_loss`` with mimir's loss, negated)."""
    return _loss(v.extra["ref"][0]) - _loss(v.logp)


def score_mink(v: View, c: DetectorConfig) -> float:
    """Min-K% Prob (Shi et al. 2024): the mean of the lowest ``max(1, int(k * n))`` values of ``logp``. Checked
    against swj0419/detect-pretrain-code ``src/run.py`` ``inference`` (``-mean(sorted(all_prob)[:int(n * ratio)])``,
    negated by ``src/eval.py`` ``sweep``), zjysteven/mink-plus-plus ``run.py`` (``mink_{ratio}``, larger = member)
    and iamgroot42/mimir ``mimir/attacks/min_k.py`` (negated mean, negated again by ``get_roc_metrics``). The
    authors' ``int(n * ratio)`` is empty for very short texts; docaudit takes at least one token."""
    return lowest_mean(v.logp, c.k)


def score_minkpp(v: View, c: DetectorConfig) -> float:
    """Min-K%++ (Zhang et al. 2024): per token ``(logp - mu) / sigma`` with ``mu`` and ``sigma`` the mean and
    standard deviation of ``log p`` under the model's next-token distribution (0 where ``sigma == 0``: a flat or
    one-hot distribution says nothing), then the mean of the lowest ``max(1, int(k * n))``. Checked against
    zjysteven/mink-plus-plus ``run.py`` (``(token_log_probs - mu) / sigma.sqrt()`` with ``sigma`` the variance
    ``E[log p ** 2] - mu ** 2``; ``mink++_{ratio}``, larger = member) and iamgroot42/mimir
    ``mimir/attacks/min_k_plus_plus.py`` (negated, negated again by ``get_roc_metrics``)."""
    return lowest_mean(minkpp_tokens(v.logp, v.mu, v.sigma), c.k)


def score_pac(v: View, c: DetectorConfig) -> float:
    """PAC (Ye et al. 2024), member-oriented: ``mean_i PD(aug_i(x)) - PD(x)``, the negation of the authors'
    ``PAC(x) = PD(x) - mean_i PD(aug_i(x))``. ``PD = mean(top max(1, int(k1 n)) logp) - mean(bottom max(1,
    int(k2 n)) logp)`` is the polarized distance and ``aug_i`` the ``N`` word-swapped copies (extra passes, see
    :func:`pac_copies`). Checked against yyy01/PAC ``attack.py``: ``calculate_Polarized_Distance`` (far region =
    top 5%, local region = bottom 30%), ``calculate_PAC`` (``pds - calibrated_pds``) and ``calculate_auc``, which
    scores ``roc_auc_score(labels, [-x for x in PAC_list])``: **a lower PAC means member**, and the published AUCs
    come from that orientation. A memorized text has a flat, high log-p profile (small PD) while its swapped copies
    lose probability at the swaps (larger PD)."""
    return float(np.mean([polarized_distance(a, c.pac_k1, c.pac_k2) for a in v.extra["pac"]])) \
        - polarized_distance(v.logp, c.pac_k1, c.pac_k2)


def score_neighbor(v: View, c: DetectorConfig) -> float:
    """Neighbourhood attack (Mattern et al. 2023): ``mean_j L(nb_j(x)) - L(x)``, the mean loss of masked-LM
    neighbours (extra passes, see :class:`MaskedNeighbors`) minus the text's loss. Checked against
    zjysteven/mink-plus-plus ``run_neighbor.py`` (``ll - mean(ll_neighbors)``, larger = member) and
    iamgroot42/mimir ``mimir/attacks/neighborhood.py`` ``NeighborhoodAttack._attack`` (``loss - mean neighbour
    loss``, negated by ``get_roc_metrics``). Optional: needs a masked language model."""
    return float(np.mean([_loss(a) for a in v.extra["neighbor"]])) - _loss(v.logp)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("loss", "Loss", score_loss),
    Method("zlib", "Zlib", score_zlib, uses_text=True),
    Method("lowercase", "Lowercase", score_lowercase, passes=("lower",)),
    Method("ref", "Ref", score_ref, passes=("ref",)),
    Method("mink", "Min-K% Prob", score_mink),
    Method("minkpp", "Min-K%++", score_minkpp),
    Method("pac", "PAC", score_pac, passes=("pac",)),
    Method("neighbor", "Neighborhood", score_neighbor, passes=("neighbor",)),
)}

DEFAULT_METHODS = ("loss", "zlib", "lowercase", "mink", "minkpp", "pac")


def resolve_methods(names: Iterable[str] | str | None, ref: bool = False, neighbor: bool = False) -> list[str]:
    """Validated method names (a comma-separated string or a list; None: the defaults, plus ``ref`` / ``neighbor``
    when their model is given)."""
    if names is None:
        names = list(DEFAULT_METHODS) + ["ref"] * ref + ["neighbor"] * neighbor
    elif isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise DocauditError(f"unknown method(s) {', '.join(unknown) or '(none given)'}: choose from {', '.join(METHODS)}")
    return names


# ---------------------------------------------------------------------------------------------------------------
# scoring


class Detector:
    """Scores sequences with the selected methods, running each needed extra pass once per sequence text.

    ``target`` queries the full texts (``score_text``) and every target-model extra pass; ``ref`` the reference
    model (method ``ref``); ``neighbors`` makes the Neighborhood texts. Extra-pass texts go through the
    queriers' caches like documents."""

    def __init__(self, target: Querier, methods: Sequence[str] | str | None = None, config: DetectorConfig = DetectorConfig(),
                 ref: Querier | None = None, neighbors: MaskedNeighbors | None = None):
        self.methods = resolve_methods(methods, ref is not None, neighbors is not None)
        self.target, self.ref, self.neighbors, self.config = target, ref, neighbors, config
        if "ref" in self.methods and ref is None:
            raise DocauditError("method 'ref' needs a reference model (--ref-model)")
        if "neighbor" in self.methods and neighbors is None:
            raise DocauditError("method 'neighbor' needs a masked language model (--neighbor-model)")
        self.passes = list(dict.fromkeys(p for m in self.methods for p in METHODS[m].passes))

    @property
    def needs_text(self) -> bool:
        return any(METHODS[m].needs_text for m in self.methods)

    def extra(self, text: str) -> dict[str, list[np.ndarray]]:
        """The log-probabilities of every extra pass over ``text``."""
        out = {}
        for name in self.passes:
            spec = PASSES[name]
            querier = self.ref if spec.model == "ref" else self.target
            out[name] = [querier.stats(t).logp for t in spec.texts(self, text)]
        return out

    def score(self, logp, mu, sigma, text: str | None = None) -> dict[str, float]:
        """Scores of one sequence given the target's arrays over it (and its text when a method needs it)."""
        if text is None and self.needs_text:
            raise DocauditError(f"methods {', '.join(m for m in self.methods if METHODS[m].needs_text)} need the text")
        view = View(logp, mu, sigma, text, self.extra(text) if self.passes else {})
        return {m: float(METHODS[m].score(view, self.config)) for m in self.methods}

    def score_text(self, text: str, sha256: str | None = None) -> dict[str, float]:
        """Scores of a text over all its windows' tokens (one forward pass when it fits one window)."""
        stats = self.target.stats(text, sha256)
        return self.score(stats.logp, stats.mu, stats.sigma, text)


def single_pass_context(lm: LoadedModel, cap: int = SINGLE_PASS_CAP) -> int:
    """The largest context a query of ``lm`` can use in one window: the model's positions (less one for a BOS
    put before every window), at most ``cap``."""
    limit = min(max_positions(lm.model) or cap, cap)
    return max(2, limit - (bos_per_window(lm.tokenizer) is not None))


def build_detector(lm: LoadedModel, query: QueryConfig, methods=None, config: DetectorConfig = DetectorConfig(),
                   ref_model: ModelConfig | LoadedModel | None = None, neighbor_model: str | MaskedNeighbors | None = None,
                   cache: bool = True, single_pass: int | None = None) -> Detector:
    """A Detector over ``lm`` whose queriers (target, and reference model when given) use ``query`` without GP
    sums (detectors do not use them). Each querier checks the query against its model: a context beyond the
    model's positions is refused, never changed. With ``single_pass=cap`` the context is derived instead: the
    longest window every model takes (:func:`single_pass_context`, at most ``cap``), with stride C-1 and no
    excerpt, so that a text that fits is scored in one forward pass."""
    from .cache import StatsCache

    ref = None if ref_model is None else ref_model if isinstance(ref_model, LoadedModel) else load_model(ref_model)
    if single_pass is not None:
        context = min(single_pass_context(m, single_pass) for m in (lm, ref) if m is not None)
        query = replace(query, context=context, stride=None, max_tokens=None)
    query = replace(query, gp=False)
    neighbors = neighbor_model
    if isinstance(neighbor_model, str):
        neighbors = load_masked_lm(neighbor_model, config, lm.config.device)
    return Detector(Querier(lm, query, StatsCache() if cache else None), methods, config,
                    None if ref is None else Querier(ref, query, StatsCache() if cache else None), neighbors)


def score_documents(paths, model: ModelConfig | LoadedModel = ModelConfig(), methods=None,
                    config: DetectorConfig = DetectorConfig(), query: QueryConfig = QueryConfig(),
                    ref_model: ModelConfig | LoadedModel | None = None, neighbor_model: str | MaskedNeighbors | None = None,
                    raw: bool = False, progress: bool = True, skips=None, normalize_chars: bool = False) -> list[dict]:
    """Raw per-document scores: ``[{"file", "n_tokens", "context", "stride", <method>: score, ...}]`` of the files
    ``paths`` (or of already loaded Documents). A document shorter than the context is one window, so its scores
    equal the sequence-level definitions; a longer one is scored over all its windows' tokens (and its extra passes
    over all theirs). With ``query.max_tokens`` every method scores the document's excerpt
    (:func:`querier.excerpt`): its characters are the text scored, extra passes included. Documents that cannot be
    used are left out and recorded in ``skips`` (a ``data.Skips``)."""
    from tqdm.auto import tqdm

    from .api import queryable_documents
    from .data import Document, Skips, load_documents, sha256_text
    from .querier import excerpt

    skips = Skips() if skips is None else skips
    loaded = isinstance(paths, list) and all(isinstance(p, Document) for p in paths)
    docs = paths if loaded else load_documents(paths, raw=raw, progress=progress, skips=skips,
                                               normalize_chars=normalize_chars)
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    detector = build_detector(lm, replace(query, max_tokens=None), methods, config, ref_model, neighbor_model)
    if query.max_tokens is not None:
        cut = [excerpt(lm.tokenizer, d.text, query.max_tokens, query.excerpt, query.seed, d.sha256) for d in docs]
        docs = [Document(d.id, d.path, d.text[c.start:c.end], sha256_text(d.text[c.start:c.end]))
                for d, c in zip(docs, cut)]
    docs = [docs[i] for i in queryable_documents(detector.target, docs, skips)]
    used = {"context": query.context, "stride": query.effective_stride}
    rows = []
    for doc in tqdm(docs, desc="scoring", unit="doc", disable=not progress):
        stats = detector.target.stats(doc.text, doc.sha256)
        rows.append({"file": doc.path, "n_tokens": stats.n_tokens, **used,
                     **detector.score(stats.logp, stats.mu, stats.sigma, doc.text)})
    return rows
