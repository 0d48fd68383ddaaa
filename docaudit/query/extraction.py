"""p_z of a book's examples: the probability that a model writes an example's suffix given its prefix, under greedy
decoding and under top-k sampling at a temperature, as Cooper et al. (2025) define it
(``pasta41/book-extraction-science``, ``script/memorization/pz.py``, ``compute_logprob_batch``; checked against it
in tests/test_extract.py).

Their definition, exactly: at each suffix position the logits are divided by the temperature, every logit below
the k-th largest is dropped (so logits tied with the k-th are all kept) and the rest renormalized; log p_z is the
sum over the suffix of the true token's log-probability under that distribution, −inf (p_z = 0) as soon as one
true token was dropped. Greedy is k = 1: the tokens tied for the largest logit share the probability, so greedy
p_z is 1 when every suffix token is the only argmax, 1/m per position where it ties with m − 1 others, and 0 when
one is not an argmax.

A transformers model runs here: the examples' trunk ``batch_size`` at a time, the LM head only on the positions that
predict a suffix token, and each row reduced to what p_z needs (the target's logit, the top-k values, the count
tied with the k-th and the largest), so no [positions, vocabulary] probability table is kept. A ``.gguf`` through
llama.cpp runs several examples side by side per call, the LM head on their suffix-predicting rows alone, reduced
the same way. A server that echoes its prompt's log-probabilities (``--backend openai``, ``/completions`` with
``echo``) is asked for the top k + 1 of every position, one request per example: p_z from them is the same
reduction (log-probabilities are logits less one constant per position, so the kept set and its renormalization
are unchanged), the one beyond the k-th showing a tie with it; a server listing fewer is refused in one line naming
the count needed."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from docaudit.errors import DocauditError, ModelError
from docaudit.query.lazy import inference_mode, torch
from docaudit.query.loaded import LoadedModel
from docaudit.query.stats import bos_per_window


@dataclass
class Pz:
    """Per example, the natural log of p_z under greedy decoding and under top-k sampling (−inf where p_z is 0, NaN
    where a server could not be asked for the example's exact tokens), float64."""

    greedy: np.ndarray
    sampled: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Pz:
        return cls(np.full(n, -np.inf), np.full(n, -np.inf))


def example_starts(n_tokens: int, example_tokens: int, stride: int) -> np.ndarray:
    """The first token of each example of ``example_tokens`` tokens every ``stride`` tokens of a text of
    ``n_tokens`` (none when the text is shorter than one example)."""
    return np.arange(0, max(0, n_tokens - example_tokens + 1), stride, dtype=np.int64)


CONTINUATION = "docaudit extract --mode continuation"


class NoPromptLogprobs(ModelError):
    """A server that gives no prompt log-probabilities: p_z cannot be asked of it, what it writes can."""


def require_logits(lm) -> None:
    """Refuse, in one line, a model whose logits (or prompt log-probabilities) cannot be read here: a server that
    gives no prompt log-probabilities (its extraction is by continuation), or a backend other than transformers,
    llama.cpp and an OpenAI-compatible server."""
    config = getattr(lm, "config", lm)
    mode = getattr(getattr(lm, "model", None), "mode", config.api_logprobs if config.backend == "openai" else None)
    if config.backend == "openai" and mode == "logit_bias":
        raise NoPromptLogprobs(
            "p_z needs the prompt's log-probabilities (/completions with echo), which this server does not give: "
            f"ask what it writes instead ({CONTINUATION})"
        )
    if config.backend not in ("transformers", "llamacpp", "openai"):
        raise ModelError(
            f"extract runs a model in this process (--backend transformers or llamacpp) or asks a server (--backend "
            f"openai), not {config.backend}"
        )


def kept_logp(z, zt, k: int):
    """The log-probability of the logits ``zt`` (one per row of ``z`` [rows, vocabulary]) under top-``k``
    sampling: −inf where ``zt`` is below the row's k-th largest logit, else ``zt`` less the log-sum-exp of the
    logits kept (the k largest and any tied with the k-th beyond them), in float64."""
    top = torch.topk(z, min(k, z.shape[1]), dim=1).values
    kth = top[:, -1]
    ties = ((z == kth[:, None]).sum(1) - (top == kth[:, None]).sum(1)).double()
    lse = torch.logsumexp(top.double(), dim=1)
    lse = torch.where(ties > 0, torch.logaddexp(lse, kth.double() + torch.log(ties.clamp(min=1))), lse)
    return torch.where(zt >= kth, zt.double() - lse, -math.inf)


def position_logp(z, targets, top_k: int, temperature: float) -> tuple:
    """For float32 logits ``z`` [rows, vocabulary] and the true ``targets`` [rows]: the true token's log-probability
    under greedy decoding (k = 1) and under top-``top_k`` sampling of ``z / temperature``, each float64 [rows]."""
    zt = z.gather(1, targets[:, None])[:, 0]
    greedy = kept_logp(z, zt, 1)
    if temperature != 1.0:
        z, zt = z / temperature, zt / temperature
    return greedy, kept_logp(z, zt, top_k)


def check_fits(lm: LoadedModel, prefix: int, suffix: int) -> None:
    """Refuse, in one line and before any weight loads, examples longer (with the BOS) than the model's positions."""
    width = prefix + suffix + int(bos_per_window(lm.tokenizer) is not None)
    if lm.max_positions is not None and width > lm.max_positions:
        raise DocauditError(
            f"an example of {prefix} + {suffix} tokens (--prefix-tokens, --suffix-tokens) is longer than the "
            f"model's {lm.max_positions} positions"
        )


CACHE_FORMAT = 1
CHUNK_EXAMPLES = 256  # examples per cache entry: a stopped run resumes from its last finished chunk


def _entry(lm: LoadedModel, examples: np.ndarray, suffix: int, settings: tuple):
    """The cache file of a chunk of examples (their ids as read, BOS included) under ``lm`` and ``settings``."""
    from docaudit.query.cache import cache_root
    from docaudit.query.cache_entries import FOLDERS

    key = {
        "format": CACHE_FORMAT,
        "model": lm.identity,
        "backend": lm.config.backend,
        "precision": lm.precision,
        "tokenizer": lm.tokenizer_hash,
        "examples": hashlib.sha256(np.ascontiguousarray(examples, dtype=np.int64).tobytes()).hexdigest(),
        "shape": list(examples.shape),
        "suffix": suffix,
        "top_k": settings[0],
        "temperature": settings[1],
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return cache_root() / FOLDERS["extraction"] / f"{digest}.json", digest


def _cached(path, digest: str, n: int) -> Pz | None:
    """A chunk's p_z from its entry, or None when it is missing or damaged (a miss): another key, another length,
    a log-probability above 0."""
    from docaudit.untrusted import load_untrusted_json

    try:
        data = load_untrusted_json(path, "extraction entry")
        if data.get("format") != CACHE_FORMAT or data.get("key") != digest:
            return None
        values = [np.array([_read(v) for v in data[k]]) for k in ("greedy", "sampled")]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if any(len(v) != n or (v > 1e-6).any() for v in values) or not np.array_equal(*map(np.isnan, values)):
        return None
    return Pz(*values)


def _read(value) -> float:
    """A stored log p_z: null is −inf (p_z = 0), ``"unknown"`` NaN (an example a server could not be asked)."""
    if value == "unknown":
        return np.nan
    return -np.inf if value is None else float(value)


def _store(path, digest: str, values: Pz) -> None:
    from docaudit.io import atomic_write_text

    def listed(v: np.ndarray) -> list:
        return [float(x) if np.isfinite(x) else "unknown" if np.isnan(x) else None for x in v]

    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": CACHE_FORMAT, "key": digest, "greedy": listed(values.greedy), "sampled": listed(values.sampled)}
    atomic_write_text(path, json.dumps(body))


def cached_pz(
    lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, prefix: int, suffix: int, settings: tuple
) -> tuple[Pz, int]:
    """:func:`pz`, a chunk of ``CHUNK_EXAMPLES`` examples at a time, each chunk kept as an ``extraction`` cache entry
    (keyed by the model, its backend and precision, the tokenizer, the chunk's ids and the decoding settings) and
    read back instead of run when present; with the number of examples run (not read back)."""
    out, ran = Pz.empty(len(starts)), 0
    examples = _examples(lm, ids, starts, prefix + suffix)
    for lo in range(0, len(starts), CHUNK_EXAMPLES):
        part = slice(lo, lo + CHUNK_EXAMPLES)
        path, digest = _entry(lm, examples[part], suffix, settings)
        found = _cached(path, digest, len(starts[part]))
        if found is None:
            found = pz(lm, ids, starts[part], prefix, suffix, settings)
            _store(path, digest, found)
            ran += len(starts[part])
        out.greedy[part], out.sampled[part] = found.greedy, found.sampled
    return out, ran


def pz(lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, prefix: int, suffix: int, settings: tuple) -> Pz:
    """:class:`Pz` of the examples of ``ids`` (the book's token ids) beginning at ``starts``, each ``prefix`` then
    ``suffix`` tokens after the model's BOS when its tokenizer uses one; ``settings`` is ``(top_k, temperature,
    batch_size)``."""
    require_logits(lm)
    check_fits(lm, prefix, suffix)
    if lm.config.backend == "llamacpp":
        return _llamacpp_pz(lm, ids, starts, prefix, suffix, settings)
    if lm.config.backend == "openai":
        return _served_pz(lm, ids, starts, prefix, suffix, settings)
    if not isinstance(lm.model, torch.nn.Module):
        raise ModelError("extract needs a torch model run in this process (--backend transformers)")
    return _trunk_pz(lm, ids, starts, prefix, suffix, settings)


def _examples(lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The examples' ids as the model reads them, after the BOS when its tokenizer uses one: [examples, columns]."""
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    tokens = np.empty((len(starts), len(head) + width), dtype=np.int64)
    tokens[:, : len(head)] = head
    tokens[:, len(head) :] = np.asarray(ids, dtype=np.int64)[starts[:, None] + np.arange(width)]
    return tokens


@inference_mode
def _llamacpp_pz(lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, prefix: int, suffix: int, settings) -> Pz:
    """:func:`pz` through llama.cpp in process: several examples side by side per decode call, the logits of their
    suffix-predicting rows alone, reduced as for transformers."""
    from docaudit.query.models import opened_backend

    top_k, temperature, _ = settings
    tokens = _examples(lm, ids, starts, prefix + suffix)
    backend = opened_backend(lm, tokens.shape[1])
    targets = torch.from_numpy(tokens[:, -suffix:])
    out = Pz.empty(len(starts))
    for group, logits in backend.suffix_logits([window.tolist() for window in tokens], suffix):
        for j, i in enumerate(group):
            greedy, sampled = position_logp(torch.from_numpy(logits[j]), targets[i], top_k, temperature)
            out.greedy[i], out.sampled[i] = float(greedy.sum()), float(sampled.sum())
    return out


@inference_mode
def _served_pz(lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, prefix: int, suffix: int, settings) -> Pz:
    """:func:`pz` from a server's echoed prompt log-probabilities: one request per example for the top k + 1 of
    each position (``OpenAIBackend.prompt_top``), reduced as the logits are. An example whose text does not
    tokenize back to its tokens cannot be asked for exactly them: its p_z is NaN (unknown), never 0."""
    from docaudit.query.backends.base import Unaskable
    from docaudit.query.models import opened_backend

    top_k, temperature, _ = settings
    backend = opened_backend(lm, prefix + suffix + 1)
    out = Pz.empty(len(starts))
    target = torch.zeros(suffix, dtype=torch.int64)  # the true token is column 0 of each row
    with backend.client.bounded():
        for i, start in enumerate(starts):
            try:
                rows, counts = backend.prompt_top(ids[start:], prefix + suffix, suffix, top_k + 1)
            except Unaskable:  # its text tokenizes otherwise: left out, its p_z unknown (NaN), counted by the audit
                out.greedy[i] = out.sampled[i] = np.nan
                continue
            except DocauditError as e:
                if i == 0 and "logprobs" in str(e):
                    raise DocauditError(f"{e} (top-k p_z with --top-k {top_k} asks for the top {top_k + 1})") from e
                raise
            if counts.min() < top_k + 1:
                raise DocauditError(
                    f"the server at {backend.client.base} lists {counts.min()} log-probabilities at a position; top-k "
                    f"p_z with --top-k {top_k} needs the top {top_k + 1} (the k-th and one beyond it, for ties): give "
                    f"--top-k {max(1, counts.min() - 1)} or less (greedy p_z needs --top-k 1)"
                )
            greedy, sampled = position_logp(torch.from_numpy(rows), target, top_k, temperature)
            out.greedy[i], out.sampled[i] = float(greedy.sum()), float(sampled.sum())
    return out


@inference_mode
def _trunk_pz(lm: LoadedModel, ids: np.ndarray, starts: np.ndarray, prefix: int, suffix: int, settings) -> Pz:
    from docaudit.query.decode import shared_head

    top_k, temperature, batch_size = settings
    model = lm.model
    model.eval()
    trunk, head, rows = shared_head(model, lm.device)
    examples = _examples(lm, ids, starts, prefix + suffix)
    width = examples.shape[1]
    # the positions that predict a suffix token (the one before each suffix token)
    predict = np.arange(width - suffix - 1, width - 1)
    out = Pz.empty(len(starts))
    buffer = torch.empty(rows, lm.vocab_size, dtype=torch.float32, device=lm.device)
    for lo in range(0, len(starts), batch_size):
        batch = starts[lo : lo + batch_size]
        flat = torch.as_tensor(examples[lo : lo + batch_size], device=lm.device)
        index = torch.as_tensor((np.arange(len(batch))[:, None] * width + predict).reshape(-1), device=lm.device)
        hidden = trunk(flat).reshape(len(batch) * width, -1)[index]
        targets = flat.reshape(-1)[index + 1]
        greedy = torch.empty(len(index), dtype=torch.float64)
        sampled = torch.empty(len(index), dtype=torch.float64)
        for at in range(0, len(index), rows):
            part = hidden[at : at + rows]
            z = head(part, buffer[: len(part)])
            g, s = position_logp(z, targets[at : at + rows], top_k, temperature)
            greedy[at : at + len(part)], sampled[at : at + len(part)] = g.cpu(), s.cpu()
        out.greedy[lo : lo + len(batch)] = greedy.view(len(batch), suffix).sum(1).numpy()
        out.sampled[lo : lo + len(batch)] = sampled.view(len(batch), suffix).sum(1).numpy()
    return out
