"""Many sequences side by side in one llama.cpp context, each with its own ``seq_id``: the rows of a generation (a
prompt's tokens decoded once for all of its samples, then one token of every row per decode call) and given
suffixes scored several to a call. Logits are asked for only where they are used: the last position of each row
when generating, the positions that predict a suffix when scoring (llama.cpp runs its LM head on those alone).

The K/V cache is unified (the rows' cells side by side, a prompt's cells shared by its samples), so the cells each
position attends over, masked, grow with the rows of a call: ``ROWS`` and ``SCORED_TOKENS`` bound a call where the
weights' reuse across rows has paid off and the attention over the others' cells does not yet cost more
(docs/benchmarks.md, "llama.cpp rows side by side")."""

from __future__ import annotations

import weakref

import numpy as np

from docaudit.query.lazy import torch

ROWS = 48  # generation rows (prompts x samples) per decoding loop
SCORED_TOKENS = 2048  # tokens of the sequences whose suffixes one decode call scores
SUFFIX_ROWS = 256  # logit rows one call returns whole (extract's p_z): 268 MB of float32 at a 262,144-token vocabulary
UBATCH = 512  # tokens llama.cpp computes at once within a call


class SideBySide:
    """A llama.cpp context over a loaded model (``llm``, a ``llama_cpp.Llama``) with room for ``cells`` tokens of
    up to ``seqs`` sequences, its K/V cache of ``kv_type``, run on ``threads`` threads, otherwise as ``llm``'s."""

    def __init__(self, llama_cpp, llm, cells: int, seqs: int, kv_type: int, threads: int):
        from llama_cpp import _internals

        # the window context's own parameters (flash attention off, the K/V type ...), so that a row's arithmetic
        # is the window's; only the room and the sequences differ
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        params.n_ctx, params.n_batch, params.n_ubatch = cells, cells, min(cells, UBATCH)
        params.n_seq_max, params.kv_unified = seqs, True
        params.type_k = params.type_v = kv_type
        params.n_threads = params.n_threads_batch = threads
        self.lib, self.cells, self.seqs = llama_cpp, cells, seqs
        self.ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self.batch = llama_cpp.llama_batch_init(cells, 0, seqs)
        weakref.finalize(self, llama_cpp.llama_batch_free, self.batch)
        self.vocab = int(llm.n_vocab())

    def decode(self, tokens: list[tuple[int, int, tuple[int, ...], bool]]) -> np.ndarray:
        """Decode ``tokens`` (id, position, sequence ids, whether its logits are wanted) onto the cache: the
        float32 logits of the wanted ones, in their order (a view of llama.cpp's buffer, rewritten by the next
        call)."""
        b = self.batch
        for k, (token, position, seqs, wanted) in enumerate(tokens):
            b.token[k], b.pos[k], b.n_seq_id[k], b.logits[k] = token, position, len(seqs), wanted
            for s, seq in enumerate(seqs):
                b.seq_id[k][s] = seq
        b.n_tokens = len(tokens)
        code = self.lib.llama_decode(self.ctx.ctx, b)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")
        n = sum(t[3] for t in tokens)
        return np.ctypeslib.as_array(self.lib.llama_get_logits(self.ctx.ctx), shape=(n, self.vocab))

    def clear(self) -> None:
        self.ctx.kv_cache_clear()


def generation_groups(prompts: list[list[int]], repeats: int) -> list[range]:
    """Consecutive prompts whose rows (``repeats`` each) fill a decoding loop of at most ``ROWS`` (one prompt at
    least)."""
    step = max(1, ROWS // max(1, repeats))
    return [range(i, min(i + step, len(prompts))) for i in range(0, len(prompts), step)]


def scoring_groups(sequences: list[list[int]]) -> list[list[int]]:
    """Indices of consecutive sequences of at most ``SCORED_TOKENS`` tokens together (one sequence at least)."""
    groups: list[list[int]] = []
    total = 0
    for i, ids in enumerate(sequences):
        if not groups or total + len(ids) > SCORED_TOKENS or len(groups[-1]) >= ROWS:
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += len(ids)
    return groups


def sample_rows(engine: SideBySide, prompts: list[list[int]], repeats: int, uniforms, temperature: float, banned):
    """Rows ``i * repeats + j`` (the ``j``-th continuation of prompt ``i``) of one group, token ``t`` drawn at
    ``uniforms[row, t]`` by docaudit's sampler: int64 [rows, uniforms' columns]."""
    from docaudit.query.sampling import inverse_cdf

    rows, n_tokens = uniforms.shape
    out = np.empty((rows, n_tokens), dtype=np.int64)
    engine.clear()
    shared = [
        (token, k, tuple(range(i * repeats, (i + 1) * repeats)), k == len(p) - 1)
        for i, p in enumerate(prompts)
        for k, token in enumerate(p)
    ]
    logits = torch.from_numpy(engine.decode(shared)).repeat_interleave(repeats, dim=0)
    ends = [len(p) for p in prompts for _ in range(repeats)]
    for t in range(n_tokens):
        drawn = inverse_cdf(logits, uniforms[:, t], temperature, banned)
        out[:, t] = drawn.numpy()
        if t + 1 < n_tokens:
            step = [(int(out[r, t]), ends[r] + t, (r,), True) for r in range(rows)]
            logits = torch.from_numpy(engine.decode(step))
    return out


def score_suffixes(engine: SideBySide, sequences: list[tuple[list[int], int]]) -> np.ndarray:
    """For each ``(ids, n)`` of one group, the float64 sum of the natural log-probabilities of its last ``n`` ids,
    each after every id before it (float32 log-softmax per position, as the transformers path)."""
    engine.clear()
    tokens, targets, owner = [], [], []
    for s, (ids, n) in enumerate(sequences):
        first = len(ids) - n - 1  # the position that predicts the suffix's first token
        tokens += [(token, k, (s,), first <= k < len(ids) - 1) for k, token in enumerate(ids)]
        targets += ids[len(ids) - n :]
        owner += [s] * n
    z = torch.from_numpy(engine.decode(tokens))
    picked = z.gather(1, torch.as_tensor(targets)[:, None])[:, 0] - torch.logsumexp(z, dim=1)
    return np.bincount(owner, weights=picked.double().numpy(), minlength=len(sequences))


def suffix_groups(n_windows: int, suffix: int) -> list[range]:
    """Consecutive windows whose ``suffix`` logit rows each fill a call of at most ``SUFFIX_ROWS`` rows (one window
    at least); a function of the count alone, so a window's batch is the same whenever its book is run."""
    step = max(1, min(ROWS, SUFFIX_ROWS // max(1, suffix)))
    return [range(i, min(i + step, n_windows)) for i in range(0, n_windows, step)]


def suffix_logits(engine: SideBySide, windows: list[list[int]], suffix: int) -> np.ndarray:
    """The float32 logits [windows, suffix, vocabulary] of the ``suffix`` positions of each window that predict its
    last ``suffix`` ids, the windows decoded side by side (a copy)."""
    engine.clear()
    tokens = []
    for s, ids in enumerate(windows):
        first = len(ids) - suffix - 1
        tokens += [(token, k, (s,), first <= k < len(ids) - 1) for k, token in enumerate(ids)]
    return np.array(engine.decode(tokens)).reshape(len(windows), suffix, engine.vocab)
