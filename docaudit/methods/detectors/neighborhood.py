"""The neighbourhood detector (Mattern et al. 2023): the loss of masked-LM neighbours of a text against its own."""

from __future__ import annotations

import numpy as np

from docaudit.config import SEED, DetectorConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.registry import PassInput, View, register, register_pass
from docaudit.methods.detectors.tokens import _loss, n_of, text_seed
from docaudit.seeds import stream


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
        positions = [
            stream(self.seed, "neighbour_masks", j, seed).choice(len(ids), size=m, replace=False) for j in range(self.n)
        ]
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
            return full[:i], full[i + len(plain) :]
    return [], []


def load_masked_lm(
    spec: str, config: DetectorConfig = DetectorConfig(), device: str = "auto", seed: int = SEED
) -> MaskedNeighbors:
    """Load a masked LM (local Hugging Face directory or hub id) as a neighbour generator seeded by the run's
    ``seed``."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from docaudit.query.models import resolve_device

    try:
        tokenizer = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForMaskedLM.from_pretrained(spec)
    except (OSError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DocauditError(f"unknown neighbour model '{spec}': could not be loaded as a masked LM ({reason})") from e
    model.to(resolve_device(device))
    return MaskedNeighbors(model, tokenizer, config.neighbors, config.neighbor_mask_ratio, seed)


@register_pass("neighbor")
def neighbours(detector: PassInput, text: str) -> list[str]:
    """The text's masked-LM neighbours (:class:`MaskedNeighbors`)."""
    return detector.neighbors(text)


@register(
    "neighbor",
    "Neighborhood",
    "mean loss of masked-LM neighbours minus the text's",
    passes=("neighbor",),
    default=False,
)
def score_neighbor(v: View, c: DetectorConfig) -> float:
    """Neighbourhood attack (Mattern et al. 2023): ``mean_j L(nb_j(x)) - L(x)``, the mean loss of masked-LM
    neighbours (extra passes, see :class:`MaskedNeighbors`) minus the text's loss. Checked against
    zjysteven/mink-plus-plus ``run_neighbor.py`` (``ll - mean(ll_neighbors)``, larger = member) and
    iamgroot42/mimir ``mimir/attacks/neighborhood.py`` ``NeighborhoodAttack._attack`` (``loss - mean neighbour
    loss``, negated by ``get_roc_metrics``). Optional: needs a masked language model."""
    return float(np.mean([_loss(a) for a in v.extra["neighbor"]])) - _loss(v.logp)
