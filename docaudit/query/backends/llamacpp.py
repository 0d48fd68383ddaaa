"""The llama.cpp backend: a ``.gguf`` file run in this process by llama.cpp (``pip install 'docaudit[llamacpp]'``),
without dequantizing it, so a quantized model needs only its file's memory.

llama.cpp keeps the logits of every position of a window (``logits_all``); each window's rows are reduced, a chunk
at a time, by the same float32 reductions as the transformers backend (``reduce.position_stats_``), so every
statistic is available and memory is bounded by one window's logits. The tokenizer is the GGUF file's own, read by
transformers (no weights are read for it), and checked against llama.cpp's on loading."""

from __future__ import annotations

import ctypes
import logging
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from docaudit.config import ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.query.backends.base import FULL, TOKENIZER_PROBE, Backend, register_backend, stats_from_rows
from docaudit.query.backends.llama_rows import (
    SideBySide,
    generation_groups,
    sample_rows,
    score_suffixes,
    scoring_groups,
    suffix_groups,
    suffix_logits,
)
from docaudit.query.backends.reduce import WorkBuffers, position_stats_
from docaudit.query.cpus import engine_threads
from docaudit.query.lazy import inference_mode, torch
from docaudit.query.loaded import LoadedModel, tokenizer_hash
from docaudit.query.progress import ENGINE_LOG, scored
from docaudit.query.sources import check_identity, gguf_tokenizer, resolve_source
from docaudit.query.stats import TokenStats, scored_spans
from docaudit.untrusted import read_untrusted

log = logging.getLogger(__name__)

LOGIT_ELEMENTS_PER_CHUNK = 1 << 25  # logit elements reduced at once (as the transformers backend on the CPU)

KV_TYPES = {"f32": "GGML_TYPE_F32", "f16": "GGML_TYPE_F16"}  # ModelConfig.kv_cache -> llama.cpp's type
CPUINFO = Path("/proc/cpuinfo")
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})
_params_lock = threading.Lock()


_engine_log: list = []  # the installed callback, kept alive while llama.cpp may call it


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as e:
        raise ModelError("--backend llamacpp needs llama-cpp-python: pip install 'docaudit[llamacpp]'") from e
    if not _engine_log:
        _engine_log.append(llama_cpp.llama_log_callback(_to_debug_log))
        _engine_log_on(llama_cpp)
    return llama_cpp


def _to_debug_log(level: int, text: bytes, user_data) -> None:
    """llama.cpp's log lines (those at context creation included) to the ``ENGINE_LOG`` logger at DEBUG, never
    to the terminal: llama-cpp-python's own callback reads ggml's older level numbers and prints its warnings."""
    line = text.decode("utf-8", "replace").rstrip()
    if line:
        logging.getLogger(ENGINE_LOG).debug("%s", line)


def _engine_log_on(llama_cpp) -> None:
    llama_cpp.llama_log_set(_engine_log[0], ctypes.c_void_p(0))


@contextmanager
def _llama_log_off(llama_cpp):
    """llama.cpp's log off for the block: a vocabulary-only model has no trained context, and llama.cpp logs that
    as an error ("possible training context overflow") although nothing is wrong; a real failure still raises."""
    silent = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(silent, ctypes.c_void_p(0))
    try:
        yield
    finally:
        _engine_log_on(llama_cpp)


def cpu_has_amx(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU has Intel AMX (Sapphire Rapids and later), from the flags the kernel lists for it."""
    try:
        text = read_untrusted(cpuinfo, "cpu list").decode("ascii", "replace")
    except OSError:
        return False
    return any(AMX_FLAGS & set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags"))


def repack_weights(setting: str, cpuinfo: Path = CPUINFO) -> bool:
    """Whether llama.cpp may repack the weights for this CPU (``ModelConfig.llama_repack``): ``auto`` allows it
    except on a CPU with AMX, where llama.cpp's AMX buffer segfaults on the first evaluation of a Q4_K file."""
    return setting == "on" or (setting == "auto" and not cpu_has_amx(cpuinfo))


@contextmanager
def llama_params(llama_cpp, repack: bool):
    """llama-cpp-python's ``Llama`` takes its model parameters from ``llama_model_default_params()`` and has no
    argument for ``use_extra_bufts`` (the repacked buffer types, AMX among them); within this block the defaults it
    reads carry ``repack`` (also for a process that serves a file with llama-cpp-python's server). One block at a
    time, since it swaps a module attribute."""
    low = llama_cpp.llama_cpp
    defaults = low.llama_model_default_params

    def params():
        p = defaults()
        p.use_extra_bufts = repack
        return p

    with _params_lock:
        low.llama_model_default_params = params
        try:
            yield
        finally:
            low.llama_model_default_params = defaults


@dataclass
class GGUFModel:
    """A GGUF file for llama.cpp: its vocabulary and trained context, read without loading its weights."""

    path: Path
    vocab_size: int
    max_positions: int | None
    kv_cache: str = "f32"
    repack: bool = True

    def open(self, n_ctx: int):
        """A llama.cpp context over the file keeping the logits of all ``n_ctx`` positions, on torch's threads,
        with its K/V cache in ``kv_cache`` precision (llama.cpp's own default is f16, whose rounding of keys and
        values moves log-probabilities by about 2e-3 nats on a trained model; f32 keeps them within 1e-4 of the
        transformers backend). Its weights are repacked for this CPU only where ``repack`` allows it. It runs one
        thread per CPU this process may use that other work leaves idle (``cpus.engine_threads``: affinity, cgroup
        quota, less the load average; no more than torch's threads), since llama.cpp's threads spin while they wait
        and lose most of their speed beyond."""
        llama_cpp = _llama_cpp()
        kv = KV_TYPES[self.kv_cache]
        threads = engine_threads(torch.get_num_threads())
        with llama_params(llama_cpp, self.repack):
            return llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=n_ctx,
                n_batch=n_ctx,
                n_ubatch=n_ctx,
                logits_all=True,
                n_threads=threads,
                n_threads_batch=threads,
                type_k=getattr(llama_cpp, kv),
                type_v=getattr(llama_cpp, kv),
                verbose=False,
            )


def load_gguf(config: ModelConfig, expected_identity: str | None = None) -> LoadedModel:
    """The GGUF file ``config.model`` (or the embedded default) as a LoadedModel for llama.cpp; its identity is the
    file's, as with the transformers backend, so a classifier trained through either accepts it."""
    llama_cpp = _llama_cpp()
    source = resolve_source(config.model, config.revision)
    if source.gguf is None:
        raise DocauditError(f"--backend llamacpp needs a .gguf file (--model PATH.gguf), not '{config.model}'")
    check_identity(source.identity, expected_identity)
    try:
        with _llama_log_off(llama_cpp):
            vocab = llama_cpp.Llama(model_path=str(source.gguf), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as e:
        raise ModelError(f"llama.cpp cannot load {source.gguf}: {e}") from e
    tokenizer = gguf_tokenizer(source.gguf, source.identity.rsplit("@", 1)[1])
    ours = tokenizer(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]
    theirs = vocab.tokenize(TOKENIZER_PROBE.encode(), add_bos=False, special=False)
    if list(ours) != list(theirs):
        raise DocauditError(
            f"the tokenizer read from {source.gguf.name} does not tokenize as llama.cpp does; this file cannot be "
            "queried with --backend llamacpp (use --backend transformers)"
        )
    arch = vocab.metadata.get("general.architecture")
    positions = int(vocab.metadata.get(f"{arch}.context_length", 0)) or None
    if config.kv_cache not in KV_TYPES:
        raise DocauditError(f"--kv-cache must be one of {', '.join(KV_TYPES)}, got {config.kv_cache!r}")
    repack = repack_weights(config.llama_repack)
    model = GGUFModel(source.gguf, int(vocab.n_vocab()), positions, config.kv_cache, repack)
    vocab.close()
    resolved = replace(config, model=source.reference)
    return LoadedModel(model, tokenizer, source.identity, tokenizer_hash(tokenizer), resolved, torch.device("cpu"))


class LlamaCppBackend(Backend):
    """One window at a time through llama.cpp, every position's logits reduced a chunk at a time."""

    name = "llamacpp"

    def __init__(self, model: GGUFModel, context: int):
        self.vocab_size = model.vocab_size
        self.kv_cache = model.kv_cache
        self.repack = model.repack
        self.llm = model.open(context + 1)  # room for a BOS before the window
        weakref.finalize(self, self.llm.close)  # freed with the backend, and before the interpreter's teardown
        self.chunk_rows = max(1, LOGIT_ELEMENTS_PER_CHUNK // self.vocab_size)
        self.work = WorkBuffers(torch.device("cpu"))
        self.positions = context + 1
        self.threads = engine_threads(torch.get_num_threads())
        self._end_ids: list[int] | None = None
        self._rows: SideBySide | None = None

    def identity(self) -> dict:
        """The backend, its K/V precision and, where off, the weights' repacking: statistics computed with other
        arithmetic are another cache entry (repacked and plain Q4_K kernels round differently)."""
        return {"backend": self.name, "kv_cache": self.kv_cache} | ({} if self.repack else {"repack": False})

    def batch_size(self, context: int) -> int:
        return 1

    def release_buffers(self) -> None:
        self.work.clear()

    def _decode(self, window: list[int]) -> np.ndarray:
        """llama.cpp's own ``[len(window), vocab]`` float32 logits buffer after decoding ``window`` from an empty
        cache (a view, not a copy: ``Llama.eval`` would copy it into ``Llama.scores`` first)."""
        llm = self.llm
        llm.reset()
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        llm._batch.set_batch(batch=window, n_past=0, logits_all=True)
        llm._ctx.decode(llm._batch)
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(window), self.vocab_size))

    def logits(self, window: list[int], rows: slice) -> np.ndarray:
        """A copy of the float32 logits of ``rows`` of ``window`` (ids as the model reads them, BOS included),
        decoded from an empty cache, every position's logits computed."""
        return np.array(self._decode(window)[rows])

    @inference_mode
    def suffix_logits(self, windows: list[list[int]], suffix: int):
        """For consecutive groups of ``windows`` (ids as the model reads them, BOS included), the group's indices
        and the float32 logits [group, suffix, vocabulary] of the positions of each window that predict its last
        ``suffix`` ids: what a caller reduces itself (``extract``'s p_z). A group's windows go side by side in one
        call (``llama_rows.suffix_groups``), the LM head run on those positions alone."""
        for group in suffix_groups(len(windows), suffix):
            chosen = [windows[i] for i in group]
            engine = self._side_by_side(sum(len(w) for w in chosen), len(chosen))
            yield group, suffix_logits(engine, chosen, suffix)

    def end_ids(self) -> list[int]:
        """The ids that end a generation for llama.cpp (its end-of-generation tokens: EOS, end of turn, ...)."""
        if self._end_ids is None:
            llama_cpp = _llama_cpp()
            vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
            self._end_ids = [i for i in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(vocab, i)]
        return self._end_ids

    def _side_by_side(self, cells: int, seqs: int) -> SideBySide:
        """The backend's context of sequences side by side (``llama_rows``) with room for at least ``cells`` tokens
        of ``seqs`` sequences: kept, and made again larger only when a larger call comes."""
        held = self._rows
        if held is None or held.cells < cells or held.seqs < seqs:
            llama_cpp = _llama_cpp()
            cells = max(cells, held.cells if held else 0)
            seqs = min(max(seqs, held.seqs if held else 0), llama_cpp.llama_max_parallel_sequences())
            kv = getattr(llama_cpp, KV_TYPES[self.kv_cache])
            self._rows = held = None
            self._rows = held = SideBySide(llama_cpp, self.llm, cells, seqs, kv, self.threads)
        return held

    @inference_mode
    def sample(self, prompts: list[list[int]], repeats: int, uniforms: np.ndarray, temperature: float) -> np.ndarray:
        """``repeats`` continuations of each prompt, row ``i * repeats + j`` the ``j``-th of prompt ``i``, token
        ``t`` drawn at ``uniforms[row, t]`` by docaudit's sampler (``sampling.inverse_cdf``: pure sampling at
        ``temperature``, end-of-generation ids excluded) from llama.cpp's logits: an int64 array [rows, uniforms'
        columns], as ``decode.Decoder.sample`` gives for a transformers model. Up to ``llama_rows.ROWS`` rows side
        by side per decoding loop: each prompt decoded once for its samples, then one token of every row per
        decode call, logits of the rows' last positions only. A row's tokens depend on its uniforms and logits
        alone, not on the rows beside it."""
        n_tokens = uniforms.shape[1]
        out = np.empty(uniforms.shape, dtype=np.int64)
        banned = torch.tensor(self.end_ids(), dtype=torch.long)
        u = torch.as_tensor(uniforms, dtype=torch.float64)
        for group in generation_groups(prompts, repeats):
            chosen = [list(prompts[i]) for i in group]
            rows = slice(group.start * repeats, group.stop * repeats)
            cells = sum(len(p) for p in chosen) + len(chosen) * repeats * n_tokens
            engine = self._side_by_side(cells, len(chosen) * repeats)
            out[rows] = sample_rows(engine, chosen, repeats, u[rows], temperature, banned)
        return out

    @inference_mode
    def suffix_logprob(self, sequences: list[tuple[list[int], int]], bos: int | None) -> np.ndarray:
        """Per ``(ids, n)`` with ``0 < n < len(ids)`` (a BOS included where the tokenizer uses one), the sum of the
        log-probabilities of the last ``n`` ids: several sequences side by side per decode call, logits of the
        positions that predict a suffix only (``llama_rows.score_suffixes``)."""
        out = np.empty(len(sequences))
        for group in scoring_groups([ids for ids, _ in sequences]):
            chosen = [sequences[i] for i in group]
            engine = self._side_by_side(sum(len(ids) for ids, _ in chosen), len(chosen))
            out[group] = score_suffixes(engine, chosen)
        return out

    @inference_mode
    def compute(
        self, ids: np.ndarray, context: int, stride: int, bos: int | None, gp: bool, batch_size: int | None = None
    ) -> TokenStats:
        shift = int(bos is not None)
        spans = scored_spans(len(ids), context, stride)
        vocab = self.vocab_size
        results = np.empty((sum(e - f for _, f, e in spans), 4), dtype=np.float32)
        gp_total = torch.zeros(vocab, dtype=torch.float64) if gp else None
        chunk = max(1, min(self.chunk_rows, context))
        exp_buf, product_buf = self.work.get("exp", chunk, vocab), self.work.get("product", chunk, vocab)
        row = 0
        for start, first, end in spans:
            window = [bos] * shift + ids[start:end].tolist()
            logits = self._decode(window)
            # window position j predicts window token j + 1: the scored tokens first..end-1 sit at
            # first - start + shift in the window, so their logits are rows first - start + shift - 1 onwards
            top = first - start + shift - 1
            rows = logits[top : top + end - first]
            targets = torch.as_tensor(ids[first:end], dtype=torch.long)
            for lo in range(0, end - first, chunk):
                n = min(chunk, end - first - lo)
                z = torch.from_numpy(rows[lo : lo + n])  # reduced in place: the next decode rewrites these rows
                *values, psum = position_stats_(z, targets[lo : lo + n], exp_buf[:n], product_buf[:n])
                results[row + lo : row + lo + n] = torch.stack(values, dim=1).numpy()
                if gp_total is not None:
                    gp_total += psum
            row += end - first
            scored(end - first)
        gp_sum = None if gp_total is None else gp_total.numpy()
        return stats_from_rows(ids, results, gp_sum, vocab, context, stride)


register_backend(
    "llamacpp",
    provides=FULL,
    load=load_gguf,
    open=lambda lm, query: LlamaCppBackend(lm.model, query.context),
    options=("kv_cache", "llama_repack"),
    help="a .gguf file through llama.cpp, not dequantized",
)
