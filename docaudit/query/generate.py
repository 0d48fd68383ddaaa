"""Sampling trap sequences from a local causal language model (the generator).

Follows the authors' ``src/scripts/gen_traps.py`` (``computationalprivacy/copyright-traps``,
``gen_single_unit_buckets``): sequences are sampled from the BOS token alone at each temperature of a cycle
(``--temp-min 0.5`` to ``--temp-max 4`` by 0.5 there), their perplexity under the generator is ``exp`` of the mean
negative log-likelihood of their tokens given the BOS (``utils.py`` ``compute_perplexity``), and a candidate is
kept when

- it survives the retokenization check. The authors (``--retokenize``) decode the sampled ids to text, encode it
  again and drop the sample unless the ids come back unchanged. A small generator rarely samples the tokenizer's
  own split of a long text, so docaudit samples a quarter more tokens than asked, encodes their text again and
  takes its first ``tokens`` ids, which must then come back unchanged (alone, and inside a document as a paragraph
  between blank lines); the text must hold no special token, no broken character and no leading or trailing
  whitespace. The trap's ids are thus the ones any reader of the text gets;
- its perplexity (of those ids) lies in the asked range (the authors keep ``int(ppl)`` in ``[min, max]`` and fill
  integer buckets evenly; docaudit records each sequence's perplexity instead of balancing buckets);
- the Jaccard similarity of its token-id set to every sequence kept so far is at most the threshold (the authors'
  ``is_duplicate`` with ``--jaccard-threshold 0.2``), so no two traps teach each other;
- given a :class:`docaudit.corpus.prose.ProseCheck` (``traps make`` gives one unless ``--any-text``), its text reads
  as prose in the documents' language: no special token written out, markup, code, other script or language
  (docaudit's addition: an author publishes the traps, and the authors' traps from a BOS are often web text).

Sampling is pure (no top-k, no top-p), seeded, and EOS cannot end a sequence early (``min_new_tokens``).

Given ``passages`` of a document (``traps make`` gives ones of the book the traps go into:
``corpus.traps.passages``), a candidate is sampled after the last ``TrapConfig.context_tokens`` tokens of one of
them instead of after the BOS alone (docaudit's addition: a small generator from its BOS writes web text, after a
book's paragraph it writes the book's language). The perplexity that the range bounds stays the authors': of the
trap's tokens after the BOS alone, so a trap's memorability is measured as the method measures it.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from docaudit.config import TrapConfig
from docaudit.corpus.prose import ProseCheck
from docaudit.corpus.traps import TrapSequence, jaccard
from docaudit.errors import DocauditError, ModelError
from docaudit.query.models import LoadedModel
from docaudit.seeds import stream

log = logging.getLogger(__name__)


@dataclass
class Generated:
    """Accepted sequences in the order they were accepted, and how many candidates each check rejected."""

    sequences: list[TrapSequence]
    rejected: Counter = field(default_factory=Counter)
    candidates: int = 0


def retokenizes(tokenizer, ids: list[int]) -> str | None:
    """The text of ``ids`` when it passes the retokenization check, else None: no special token; decoded, the text
    has no leading or trailing whitespace and no broken character; encoded again alone and as a paragraph between blank
    lines, it gives back exactly ``ids``."""
    special = set(tokenizer.all_special_ids)
    if any(i in special for i in ids):
        return None
    text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if not text or text != text.strip() or "\ufffd" in text:
        return None
    if list(tokenizer(text, add_special_tokens=False).input_ids) != list(ids):
        return None
    within = list(tokenizer("Text.\n\n" + text + "\n\nText.", add_special_tokens=False).input_ids)
    ids = list(ids)
    if not any(within[i : i + len(ids)] == ids for i in range(len(within) - len(ids) + 1)):
        return None
    return text


@torch.no_grad()
def perplexities(model, ids: torch.Tensor, bos: int) -> np.ndarray:
    """Per row of ``ids`` (no BOS), ``exp`` of the mean negative log-likelihood of its tokens after a BOS."""
    inputs = torch.cat([torch.full((len(ids), 1), bos, dtype=ids.dtype, device=ids.device), ids], dim=1)
    logits = model(input_ids=inputs).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
    return np.exp(nll.mean(dim=1).cpu().numpy().astype(np.float64))


def _prompts(tok, passages: list[str] | None, n_tokens: int, bos: int) -> list[list[int]] | None:
    """The BOS and the last ``n_tokens`` tokens of each passage that has as many (None: no passages)."""
    if passages is None:
        return None
    rows = [ids[-n_tokens:] for ids in tok(passages, add_special_tokens=False).input_ids if len(ids) >= n_tokens]
    if not rows:
        raise DocauditError(f"no passage of the documents holds {n_tokens} generator tokens to write traps after")
    return [[bos, *ids] for ids in rows]


def generate_sequences(
    lm: LoadedModel,
    n: int,
    config: TrapConfig,
    seed: int,
    progress: bool = False,
    prose: ProseCheck | None = None,
    passages: list[str] | None = None,
    kept: list[TrapSequence] | None = None,
) -> Generated:
    """``n`` distinct trap sequences of ``config.tokens`` tokens from the generator ``lm``, sampled from the run's
    ``seed`` (see the module docstring), each passing ``prose`` when given, sampled after the ``passages`` when given
    (in turn), none a near duplicate of ``kept`` either; a DocauditError when ``config.max_candidates`` candidates do
    not give ``n``."""
    from tqdm.auto import tqdm

    if lm.config.backend != "transformers" or not isinstance(lm.model, torch.nn.Module):
        raise DocauditError("trap generation needs a model run in this process (--backend transformers)")
    tok = lm.tokenizer
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if bos is None:
        raise DocauditError("the generator's tokenizer has no BOS or EOS token to start sequences from")
    extra = config.tokens // 4 + 2  # sampled beyond config.tokens, for the retokenization check
    prefix = 1 + (config.context_tokens if passages is not None else 0)  # the BOS and the passage's tokens
    if lm.max_positions is not None and config.tokens + extra + prefix > lm.max_positions:
        fits = [t for t in range(1, lm.max_positions) if t + t // 4 + 2 + prefix <= lm.max_positions]
        raise DocauditError(
            f"--tokens {config.tokens} is too long for the generator: it takes {lm.max_positions} positions, "
            f"enough for at most {max(fits, default=0)} tokens" + (" after a passage" if passages is not None else "")
        )
    prompts = _prompts(tok, passages, config.context_tokens, bos)
    model = lm.model
    model.eval()
    torch.manual_seed(seed)
    out = Generated([])
    kept_sets: list[set] = [set(s.token_ids) for s in kept or []]
    batches = 0
    pad = tok.pad_token_id if tok.pad_token_id is not None else bos
    per_sequence = config.tokens + extra
    # the bar counts tokens sampled against those the traps still need at the acceptance rate so far
    bar = tqdm(total=n * per_sequence, desc="generating traps", unit="tok", unit_scale=True, disable=not progress)
    streamer = _TokenCounter(bar) if progress else None
    try:
        while len(out.sequences) < n:
            for temperature in config.temperatures:
                if out.candidates >= config.max_candidates:
                    raise DocauditError(
                        f"only {len(out.sequences)} of {n} trap sequences after {out.candidates} candidates "
                        f"(rejected: {dict(out.rejected)}); widen the perplexity range or lower the number of traps"
                        + (", or use a generator that writes prose in the documents' language" if prose else "")
                    )
                if prompts is None:
                    start = torch.full((config.batch_size, 1), bos, dtype=torch.long, device=lm.device)
                else:
                    rows = [prompts[(batches * config.batch_size + i) % len(prompts)] for i in range(config.batch_size)]
                    start = torch.tensor(rows, dtype=torch.long, device=lm.device)
                batches += 1
                sampled = model.generate(
                    start,
                    attention_mask=torch.ones_like(start),
                    do_sample=True,
                    temperature=float(temperature),
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=config.tokens + extra,
                    min_new_tokens=config.tokens + extra,
                    pad_token_id=pad,
                    streamer=streamer,
                )[:, start.shape[1] :]
                candidates = []
                for row in sampled.cpu().tolist():
                    out.candidates += 1
                    ids = canonical_prefix(tok, row, config.tokens, lstrip=prompts is not None)
                    text = None if ids is None else retokenizes(tok, ids)
                    if text is None:
                        out.rejected["retokenization"] += 1
                    elif prose is not None and (problem := prose.problem(text)) is not None:
                        out.rejected[f"not prose: {problem}"] += 1
                    else:
                        candidates.append((text, ids))
                if not candidates:
                    continue
                ppl = perplexities(model, torch.tensor([ids for _, ids in candidates], device=lm.device), bos)
                for (text, ids), p in zip(candidates, ppl):
                    reason = _rejects(ids, float(p), config, kept_sets)
                    if reason is not None:
                        out.rejected[reason] += 1
                        continue
                    kept_sets.append(set(ids))
                    out.sequences.append(TrapSequence(text, ids, float(p)))
                    if len(out.sequences) == n:
                        return out
                kept = len(out.sequences)
                needed = math.ceil((n - kept) * out.candidates / max(kept, 1)) * per_sequence
                bar.total = bar.n + needed
                bar.set_postfix(traps=f"{kept}/{n}")
    finally:
        bar.close()
    return out


class _TokenCounter:
    """A ``generate`` streamer that moves the bar by the tokens sampled at each step (the whole batch's; the
    prompt, which ``generate`` hands over first, is not counted)."""

    def __init__(self, bar):
        self.bar, self.prompt = bar, True

    def put(self, value) -> None:
        if self.prompt:
            self.prompt = False
            return
        self.bar.update(int(value.numel()))

    def end(self) -> None:
        self.prompt = True


def canonical_prefix(tokenizer, sampled: list[int], n: int, lstrip: bool = False) -> list[int] | None:
    """The first ``n`` ids of the sampled text encoded again (the ids the text has wherever it is read), or None
    when the sample holds a special token or its text has fewer than ``n`` tokens; ``lstrip``: the text's leading
    whitespace dropped first (a continuation of a passage may begin with it)."""
    if set(sampled) & set(tokenizer.all_special_ids):
        return None
    text = tokenizer.decode(sampled, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if lstrip:
        text = text.lstrip()
    ids = list(tokenizer(text, add_special_tokens=False).input_ids)[:n]
    return ids if len(ids) == n else None


def _rejects(ids: list[int], ppl: float, config: TrapConfig, kept_sets: list[set]) -> str | None:
    """The name of the check that rejects a candidate, or None to keep it."""
    if not math.isfinite(ppl) or not config.min_perplexity <= ppl < config.max_perplexity:
        return "perplexity out of range"
    own = set(ids)
    if any(jaccard(own, other) > config.jaccard for other in kept_sets):
        return "near duplicate"
    return None


def continuations(lm: LoadedModel, prompts: list[list[int]], samples: int, n_tokens: int, options: dict) -> list:
    """Per prompt (generator token ids, all of one length), ``samples`` continuations of exactly ``n_tokens`` new
    ids, pure sampling at ``options["temperature"]`` (no top-k, no top-p; EOS cannot end one early), the prompt
    after the generator's BOS when its tokenizer starts encodings with one; ``options["batch_size"]`` prompts (with
    their samples) per decoding loop (``query.decode`` for a transformers model; llama.cpp's own logits, many rows
    side by side, for a ``.gguf`` run through llama.cpp). The ``j``-th continuation of the ``i``-th prompt is drawn
    from its own stream of uniforms (``options["seed"]``, ``i``, ``j``; or, with ``options["streams"]``, the
    prompt's own ``(seed, index)`` there, e.g. prompts of several books in one loop) by the one sampler
    (``sampling.inverse_cdf``), so it does not depend on the batch size, on the other prompts or on the engine
    beyond its logits."""
    from docaudit.query.stats import bos_per_window

    require_in_process(lm, "the generator")
    bos = bos_per_window(lm.tokenizer)
    rows = [([bos] if bos is not None else []) + list(p) for p in prompts]
    if lm.max_positions is not None and rows and len(rows[0]) + n_tokens > lm.max_positions:
        raise DocauditError(
            f"the generator takes {lm.max_positions} positions, fewer than a passage's {len(rows[0]) + n_tokens} tokens"
        )
    if not rows:
        return []
    if lm.config.backend == "llamacpp":
        from docaudit.query.models import opened_backend

        sample = opened_backend(lm, len(rows[0]) + n_tokens).sample
    else:
        from docaudit.query.decode import Decoder

        lm.model.eval()
        sample = Decoder(lm.model, lm.device).sample
    out = []
    keys = options.get("streams") or [(options["seed"], i) for i in range(len(rows))]
    step = max(1, options["batch_size"])
    for start, end in loops(keys, step, apart=lm.config.backend == "llamacpp"):
        batch = rows[start:end]
        uniforms = np.stack(
            [
                stream(keys[start + i][0], "continuations", keys[start + i][1], j).random(n_tokens)
                for i in range(len(batch))
                for j in range(samples)
            ]
        )
        sampled = sample(batch, samples, uniforms, float(options["temperature"])).tolist()
        out += [sampled[i * samples : (i + 1) * samples] for i in range(len(batch))]
    return out


def loops(keys: list[tuple[int, int]], step: int, apart: bool) -> list[tuple[int, int]]:
    """The ``[start, end)`` prompts of each decoding loop: ``step`` at most; with ``apart``, never two streams' seeds
    (two books) in one loop. llama.cpp's quantized kernels round a row's logits by the shape of the batch it is
    decoded in, so there a book's suffixes are the same alone or beside other books only when its prompts are
    decoded apart from theirs, in loops cut from its own first prompt."""
    cuts, start = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or i - start == step or (apart and keys[i][0] != keys[start][0]):
            cuts.append((start, i))
            start = i
    return cuts


def continuation_texts(lm: LoadedModel, prompts: list[list[int]], samples: int, n_tokens: int, options: dict) -> list:
    """Per prompt, the texts of its ``samples`` continuations (as :func:`continuations`): decoded from the ids a
    model run in this process samples, or written by a server that scores given text (:func:`_served_texts`)."""
    if lm.config.backend == "openai":
        require_given_text(lm, "the generator")
        return _served_texts(lm, prompts, samples, n_tokens, options)
    tok = lm.tokenizer
    sampled = continuations(lm, prompts, samples, n_tokens, options)
    return [
        [tok.decode(x, skip_special_tokens=True, clean_up_tokenization_spaces=False) for x in rows] for rows in sampled
    ]


def _served_texts(lm: LoadedModel, prompts: list[list[int]], samples: int, n_tokens: int, options: dict) -> list:
    """Continuations a server samples: per row one ``/completions`` request for ``n_tokens`` tokens after the
    prompt's text at ``options["temperature"]``, its filters off (``top_p`` 1; on llama.cpp's server also
    ``top_k`` 0, ``min_p`` 0 and no repeat penalty), the end-of-sequence id biased out, and the row's own seed
    (stream ``served_seeds`` at the prompt's key, as in :func:`continuations`, and ``j``). The server's sampler
    draws, not docaudit's uniforms: a row is the same on a rerun only as far as the server honours its seed, and a
    server may stop short of ``n_tokens``."""
    from concurrent.futures import ThreadPoolExecutor

    from docaudit.query.backends.api_client import show

    client, tok = lm.model, lm.tokenizer
    texts = [tok.decode(p, skip_special_tokens=True, clean_up_tokenization_spaces=False) for p in prompts]
    common = {"model": client.model, "max_tokens": n_tokens, "temperature": float(options["temperature"])}
    common["top_p"] = 1.0
    if tok.eos_token_id is not None:
        common["logit_bias"] = {str(tok.eos_token_id): -100.0}
    if client.llama_cpp_server:
        common |= {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}
    url = f"{client.base}/completions"

    def one(row: tuple[int, int]) -> str:
        i, j = row
        seed = int(stream(keys[i][0], "served_seeds", keys[i][1], j).integers(2**31 - 1))
        answer = client.call("/completions", {**common, "prompt": texts[i], "seed": seed})
        choices = answer.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        if not isinstance(first.get("text"), str):
            raise DocauditError(f"the server at {url} answered without a text (choices: {show(choices)})")
        return first["text"]

    keys = options.get("streams") or [(options["seed"], i) for i in range(len(prompts))]
    rows = [(i, j) for i in range(len(prompts)) for j in range(samples)]
    with client.bounded(), ThreadPoolExecutor(max(1, client.config.api_concurrency)) as pool:
        written = list(pool.map(one, rows))
    return [written[i * samples : (i + 1) * samples] for i in range(len(prompts))]


PROBE_HINT = "docaudit probe tests a book with what such a model writes"


def require_in_process(lm, role: str) -> None:
    """Refuse, in one line (a :class:`ModelError`), a model (loaded, or its ``ModelConfig``) that is not run in
    this process (a transformers model or a ``.gguf`` through llama.cpp): a server cannot sample from docaudit's
    own uniforms."""
    config = getattr(lm, "config", lm)
    if config.backend == "openai":
        raise ModelError(f"{role} is served by an API: it cannot sample here; {PROBE_HINT}")
    if config.backend not in ("transformers", "llamacpp") or (
        config.backend == "transformers" and isinstance(lm, LoadedModel) and not isinstance(lm.model, torch.nn.Module)
    ):
        raise ModelError(f"{role} must be a model run in this process (--backend transformers or llamacpp)")


def require_given_text(lm, role: str) -> None:
    """Refuse, in one line (a :class:`ModelError`), a model (loaded, or its ``ModelConfig``) that cannot score or
    write a given text: a server without prompt log-probabilities (a chat-only API; known once it is loaded),
    or a backend that is none of transformers, llama.cpp or an OpenAI-compatible server."""
    config = getattr(lm, "config", lm)
    if config.backend == "openai":
        if isinstance(lm, LoadedModel) and getattr(lm.model, "mode", None) != "echo":
            raise ModelError(
                f"{role} is served without prompt log-probabilities (a chat-only API, or --api-logprobs "
                f"logit_bias): it cannot score or write given suffixes; {PROBE_HINT}"
            )
        return
    require_in_process(lm, role)
