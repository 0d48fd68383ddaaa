"""The reduction of next-token logits to the per-token statistics, shared by the backends that see every logit:
rows of float32 logits are reduced a chunk at a time in reused work buffers, so no ``[positions, vocab]`` array
beyond one chunk is ever built."""

from __future__ import annotations

from docaudit.query.lazy import torch


def position_stats_(
    z: torch.Tensor, targets: torch.Tensor, e: torch.Tensor | None = None, t: torch.Tensor | None = None
) -> tuple[torch.Tensor, ...]:
    """Per-row statistics of float32 next-token logits ``z [P, V]`` for true tokens ``targets [P]``: log p of the
    true token, log p_max, the Min-K%++ mean and standard deviation of log p under p, and the column sum of p.

    Destroys ``z``; ``e`` and ``t`` are optional float32 ``[P, V]`` work buffers (allocated when omitted). Every
    sum over the vocabulary is a float32 pairwise (cascade) sum, the variance is computed around the mean (two
    passes, no cancellation), and the column sum of p is one matrix-vector product."""
    if e is None:
        e = torch.empty_like(z)
    if t is None:
        t = torch.empty_like(z)
    z.sub_(z.amax(-1, keepdim=True))  # z <- z - max z
    torch.exp(z, out=e)  # e <- exp(z)
    s0 = e.sum(-1, keepdim=True)
    w = s0.reciprocal()
    log_s0 = s0.log_()  # log-normalizer relative to the max
    psum = torch.mv(e.t(), w[:, 0])  # sum over rows of p = e / s0
    logp = z.gather(1, targets[:, None]).sub_(log_s0)
    c = torch.mul(e, z, out=t).sum(-1, keepdim=True).mul_(w)  # E_p[z]
    z.sub_(c)
    var = e.mul_(z).mul_(z).sum(-1, keepdim=True).mul_(w)  # E_p[(z - E_p[z])^2] = Var_p[log p]
    return logp[:, 0], -log_s0[:, 0], c.sub_(log_s0)[:, 0], var.sqrt_()[:, 0], psum


class WorkBuffers:
    """Float32 ``[rows, vocab]`` work buffers kept between chunks and documents (no page faults per chunk)."""

    def __init__(self, device: torch.device):
        self.device = device
        self._work: dict[str, torch.Tensor] = {}

    def get(self, name: str, rows: int, vocab: int) -> torch.Tensor:
        buf = self._work.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != vocab:
            self._work.pop(name, None)
            buf = self._work[name] = torch.empty(rows, vocab, dtype=torch.float32, device=self.device)
        return buf[:rows]

    def clear(self) -> None:
        self._work.clear()
