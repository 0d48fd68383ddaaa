"""Sampling trap sequences from a local causal language model (the generator).

Follows the authors' ``src/scripts/gen_traps.py`` (``computationalprivacy/copyright-traps``,
``gen_single_unit_buckets``): sequences of exactly ``tokens`` tokens are sampled from the BOS token alone at each
temperature of a cycle (``--temp-min 0.5`` to ``--temp-max 4`` by 0.5 there), their perplexity under the generator
is ``exp`` of the mean negative log-likelihood of the ``tokens`` sampled tokens given the BOS (``utils.py``
``compute_perplexity``), and a candidate is kept when

- its perplexity lies in the asked range (the authors keep ``int(ppl)`` in ``[min, max]`` and fill integer
  buckets evenly; docaudit records each sequence's perplexity instead of balancing buckets);
- it survives the retokenization check (the authors' ``--retokenize``: decoded to text and encoded again, it
  gives back the same ids); docaudit also asks that the ids survive inside a document, as a paragraph between
  blank lines, that the text has no special token, no broken character and no leading or trailing whitespace;
- the Jaccard similarity of its token-id set to every sequence kept so far is at most the threshold (the authors'
  ``is_duplicate`` with ``--jaccard-threshold 0.2``), so no two traps teach each other.

Sampling is pure (no top-k, no top-p), seeded, and EOS cannot end a sequence early (``min_new_tokens``).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from docaudit.config import TrapConfig
from docaudit.corpus.traps import TrapSequence, jaccard
from docaudit.errors import DocauditError
from docaudit.query.models import LoadedModel

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
    prefix = tokenizer("Text.\n\n", add_special_tokens=False).input_ids
    within = tokenizer("Text.\n\n" + text + "\n\nText.", add_special_tokens=False).input_ids
    if list(within[len(prefix) : len(prefix) + len(ids)]) != list(ids):
        return None
    return text


@torch.no_grad()
def perplexities(model, ids: torch.Tensor, bos: int) -> np.ndarray:
    """Per row of ``ids`` (no BOS), ``exp`` of the mean negative log-likelihood of its tokens after a BOS."""
    inputs = torch.cat([torch.full((len(ids), 1), bos, dtype=ids.dtype, device=ids.device), ids], dim=1)
    logits = model(input_ids=inputs).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
    return np.exp(nll.mean(dim=1).cpu().numpy().astype(np.float64))


def generate_sequences(lm: LoadedModel, n: int, config: TrapConfig, progress: bool = False) -> Generated:
    """``n`` distinct trap sequences of ``config.tokens`` tokens from the generator ``lm`` (see the module
    docstring); a DocauditError when ``config.max_candidates`` candidates do not give ``n``."""
    from tqdm.auto import tqdm

    if lm.config.backend != "transformers" or not isinstance(lm.model, torch.nn.Module):
        raise DocauditError("trap generation needs a model run in this process (--backend transformers)")
    tok = lm.tokenizer
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if bos is None:
        raise DocauditError("the generator's tokenizer has no BOS or EOS token to start sequences from")
    model = lm.model
    model.eval()
    torch.manual_seed(config.seed)
    out = Generated([])
    kept_sets: list[set] = []
    pad = tok.pad_token_id if tok.pad_token_id is not None else bos
    bar = tqdm(total=n, desc="generating traps", unit="seq", disable=not progress)
    try:
        while len(out.sequences) < n:
            for temperature in config.temperatures:
                if out.candidates >= config.max_candidates:
                    raise DocauditError(
                        f"only {len(out.sequences)} of {n} trap sequences after {out.candidates} candidates "
                        f"(rejected: {dict(out.rejected)}); widen the perplexity range or lower the number of traps"
                    )
                start = torch.full((config.batch_size, 1), bos, dtype=torch.long, device=lm.device)
                sampled = model.generate(
                    start,
                    attention_mask=torch.ones_like(start),
                    do_sample=True,
                    temperature=float(temperature),
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=config.tokens,
                    min_new_tokens=config.tokens,
                    pad_token_id=pad,
                )[:, 1 : 1 + config.tokens]
                ppl = perplexities(model, sampled, bos)
                for row, p in zip(sampled.cpu().tolist(), ppl):
                    out.candidates += 1
                    kept = _check(tok, row, float(p), config, kept_sets)
                    if isinstance(kept, str):
                        out.rejected[kept] += 1
                        continue
                    text, ids = kept
                    kept_sets.append(set(ids))
                    out.sequences.append(TrapSequence(text, ids, float(p)))
                    bar.update()
                    if len(out.sequences) == n:
                        return out
    finally:
        bar.close()
    return out


def _check(tok, ids: list[int], ppl: float, config: TrapConfig, kept_sets: list[set]):
    """``(text, ids)`` for a kept candidate, else the name of the check that rejected it."""
    if len(ids) != config.tokens:
        return "too short"
    if not math.isfinite(ppl) or not config.min_perplexity <= ppl < config.max_perplexity:
        return "perplexity out of range"
    text = retokenizes(tok, ids)
    if text is None:
        return "retokenization"
    own = set(ids)
    if any(jaccard(own, other) > config.jaccard for other in kept_sets):
        return "near duplicate"
    return text, ids
