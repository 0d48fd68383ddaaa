"""The transformers backend: a model loaded by transformers (any precision, bitsandbytes quantization), queried in
this process.

Windows of equal length are batched. The model's trunk produces hidden states; the LM head is applied to chunks
of scored positions, and each chunk's logits are reduced at once (in float32) to the per-token statistics, so no
[batch, length, vocab] logits tensor is ever built. Only a few floats per token leave the device, once per document.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from docaudit.config import DTYPES, QUANTIZE, ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.query.backends.base import FULL, Backend, register_backend, stats_from_rows
from docaudit.query.backends.reduce import WorkBuffers, position_stats_
from docaudit.query.lazy import inference_mode, torch
from docaudit.query.loaded import Deferred, LoadedModel, available_memory, resolve_device, tokenizer_hash
from docaudit.query.progress import scored
from docaudit.query.sources import (
    check_identity,
    first_line,
    hub_access,
    offline,
    resolve_source,
)
from docaudit.query.stats import TokenStats, scored_spans

log = logging.getLogger(__name__)


TOKENS_PER_BATCH = {"cpu": 4096, "cuda": 32768}
PASS_MEMORY_SHARE = 0.5  # of the memory available, the most one forward pass may take (the rest: its outputs, others)


# Rows of the LM head computed (and reduced) at once, as logit elements: a larger chunk reads the head's weight
# fewer times (Gemma-3's is 262,144 x 640 floats = 671 MB, read once per chunk); each chunk needs two or three
# [rows, vocab] float32 buffers. Measured in docs/benchmarks.md.
LOGIT_ELEMENTS_PER_CHUNK = {"cpu": 1 << 25, "cuda": 1 << 27}


class _Head:
    """The LM head applied to chunks of hidden states, writing float32 logits.

    On the CPU a large plain float32 ``nn.Linear`` head runs through oneDNN with a pre-packed copy of its weight
    (laid out for ``rows`` rows at a time), which measured 1.3-1.45x faster than the default BLAS for these shapes
    (docs/benchmarks.md); its input and output are plain dense tensors where torch has oneDNN's pointwise linear
    (no conversion of every ``[rows, vocab]`` output from oneDNN's own format, which took a third of the head's
    time). Set ``docaudit.query.backends.transformers.CPU_ONEDNN_HEAD = False`` to save the copy's memory.
    Otherwise the product is written into the caller's buffer (no fresh [rows, vocab] allocation per chunk)."""

    def __init__(
        self, head: Callable, module: torch.nn.Module | None, cap: float | None, device: torch.device, rows: int = 128
    ):
        self.head, self.cap = head, cap
        self.splits = module is not None  # False: ``head`` is the identity after the full forward
        self.weight = self.packed = None
        self.dense_io = False
        if (
            isinstance(module, torch.nn.Linear)
            and module.bias is None
            and type(module.weight) is torch.nn.Parameter
            and module.weight.dtype == torch.float32
        ):
            self.weight = module.weight
            if (
                device.type == "cpu"
                and CPU_ONEDNN_HEAD
                and module.weight.numel() >= ONEDNN_MIN_WEIGHT
                and torch.backends.mkldnn.is_available()
            ):
                try:
                    if hasattr(torch.ops.mkldnn, "_linear_pointwise"):
                        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), rows)
                        self.dense_io = True
                    else:
                        self.packed = self.weight.detach().to_mkldnn()
                except (RuntimeError, AttributeError):
                    self.packed, self.dense_io = None, False

    def __call__(self, hidden: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and hidden.dtype == torch.float32 and self.dense_io:
            z = torch.ops.mkldnn._linear_pointwise(hidden.contiguous(), self.packed, None, "none", [], "")
        elif self.packed is not None and hidden.dtype == torch.float32:
            z = torch._C._nn.mkldnn_linear(hidden.contiguous().to_mkldnn(), self.packed, None).to_dense()
        elif self.weight is not None and hidden.dtype == torch.float32:
            z = torch.matmul(hidden, self.weight.t(), out=out)
        else:  # other heads (quantized, half precision, full-forward fallback): float32 copy of their output
            z = self.head(hidden)
            return z.float().contiguous() if out is None else out.copy_(z)
        if self.cap:
            z.div_(self.cap).tanh_().mul_(self.cap)
        return z


CPU_ONEDNN_HEAD = True


ONEDNN_MIN_WEIGHT = 1 << 24  # smaller heads: the default BLAS (oneDNN's per-shape setup would dominate)


def split_model(model: torch.nn.Module) -> tuple[Callable, Callable, torch.nn.Module | None, float | None]:
    """``(trunk, head, head_module, softcap)`` with ``head(trunk(ids)) == model(ids).logits``, so the head can run
    on chunks of positions. Falls back to the full forward (head = identity, no module) when the model does not
    decompose that way."""
    head = model.get_output_embeddings()
    base = getattr(model, "base_model", None)
    cap = getattr(model.config, "final_logit_softcapping", None)

    def trunk(ids):
        return base(input_ids=ids, use_cache=False).last_hidden_state

    def head_fn(hidden):
        z = head(hidden)
        return torch.tanh(z / cap) * cap if cap else z

    def full(ids):
        return model(input_ids=ids, use_cache=False).logits

    if head is None or base is None or base is model:
        return full, (lambda z: z), None, None
    probe = torch.arange(1, 9, device=head.weight.device)[None] % head.weight.shape[0]
    with torch.inference_mode():
        try:
            ok = torch.allclose(head_fn(trunk(probe)).float(), full(probe).float(), atol=1e-3, rtol=1e-3)
        except (AttributeError, TypeError, RuntimeError):
            ok = False
    if not ok:
        log.info("model does not split into trunk and head; using the full forward")
        return full, (lambda z: z), None, None
    return trunk, head_fn, head, cap


def prepared(model: torch.nn.Module, device: torch.device, rows: int) -> tuple[Callable, _Head]:
    """The model's trunk and its LM head for chunks of ``rows`` rows, made once per model and kept on it: the split's
    check and the head's packed weight take seconds, and every backend opened on the model (the querier's, each
    detector's) shares them. They are made again when the head's weight has changed since (training in place bumps
    its version; the packed weight is a copy) or the head's settings have."""
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    version = None if weight is None else (id(weight), weight.data_ptr(), weight._version)
    made_for = (device, rows, CPU_ONEDNN_HEAD, ONEDNN_MIN_WEIGHT, version)
    held = getattr(model, "_docaudit_prepared", None)
    if held is None or held[0] != made_for:
        trunk, head_fn, module, cap = split_model(model)
        held = (made_for, trunk, _Head(head_fn, module, cap, device, rows))
        model._docaudit_prepared = held
    return held[1], held[2]


class TransformersBackend(Backend):
    """The model's trunk once per batch of windows, its LM head and the reductions per chunk of positions."""

    name = "transformers"

    def __init__(self, model: torch.nn.Module, vocab_size: int, device: torch.device):
        self.vocab_size, self.device = vocab_size, device
        self.kind = "cuda" if device.type == "cuda" else "cpu"
        self.chunk_rows = max(1, LOGIT_ELEMENTS_PER_CHUNK[self.kind] // vocab_size)
        self._trunk, self._head = prepared(model, device, self.chunk_rows)
        self.work = WorkBuffers(device)
        self.token_bytes, self.score_bytes = activation_bytes(model)

    def batch_size(self, context: int) -> int:
        """Windows per forward pass when the query does not say: about ``TOKENS_PER_BATCH`` tokens, fewer when a
        pass of that many would not fit the memory available (:meth:`fitting_windows`)."""
        return max(1, min(TOKENS_PER_BATCH[self.kind] // context, self.fitting_windows(context)))

    def pass_bytes(self, windows: int, length: int) -> int:
        """About the most memory one forward pass of ``windows`` windows of ``length`` tokens takes."""
        return windows * length * (self.token_bytes + self.score_bytes * length)

    def fitting_windows(self, context: int) -> int:
        """How many windows of ``context`` tokens a forward pass may hold in half the memory available."""
        return int(available_memory(self.device) * PASS_MEMORY_SHARE // self.pass_bytes(1, context + 1))

    def tokens_per_pass(self, context: int, batch_size: int | None) -> int:
        """The tokens of one forward pass: ``batch_size`` windows of ``context`` (by default :meth:`batch_size`);
        a ``batch_size`` whose pass would not fit the memory available is refused, before any pass."""
        fits = self.fitting_windows(context)
        if fits < 1 or (batch_size is not None and batch_size > fits):
            windows = batch_size or 1
            raise DocauditError(
                f"a forward pass of {windows:,} window{'s' * (windows != 1)} of {context:,} tokens (--batch-size, "
                f"--context) needs about {self.pass_bytes(windows, context + 1) / 1e9:.1f} GB, more than the "
                f"{PASS_MEMORY_SHARE:.0%} of the {available_memory(self.device) / 1e9:.1f} GB available it may take"
                + (f"; at most {fits:,} windows fit" if fits >= 1 else "; lower --context")
            )
        return (batch_size or self.batch_size(context)) * context

    def release_buffers(self) -> None:
        """Free the work buffers (they are otherwise kept for the next document)."""
        self.work.clear()

    def compute(
        self, ids: np.ndarray, context: int, stride: int, bos: int | None, gp: bool, batch_size: int | None = None
    ) -> TokenStats:
        """Query the model over all windows of ``ids`` (no cache): :meth:`compute_many` of one document."""
        return self.compute_many([ids], context, stride, bos, gp, batch_size)[0]

    @inference_mode
    def compute_many(
        self,
        docs: list[np.ndarray],
        context: int,
        stride: int,
        bos: int | None,
        gp: bool,
        batch_size: int | None = None,
    ) -> list[TokenStats]:
        """Query the model over all windows of several documents (no cache), the windows of all of them batched
        together: many short texts (a detector's extra passes, report snippets) take a few forward passes, not one
        each.

        The windows, longest first, go through the trunk in batches of at most ``batch_size`` full windows' tokens
        (``batch_size`` windows of the context; more when shorter), each right-padded to the longest in its batch
        (causal attention: padding after a window changes none of its positions); the LM
        head and the reductions run on chunks of at most ``chunk_rows`` scored positions, in float32 work buffers
        reused from chunk to chunk. Memory is bounded by the batch and chunk sizes whatever the documents'
        lengths; the only per-token results are four float32 values, copied to the host once at the end. GP sums
        are per document, so with ``gp`` each document is queried on its own."""
        if not docs:
            return []
        if gp and len(docs) > 1:
            return [self.compute_many([ids], context, stride, bos, gp, batch_size)[0] for ids in docs]
        C, S = context, stride
        windows = [(d, *span) for d, ids in enumerate(docs) for span in scored_spans(len(ids), C, S)]
        windows.sort(key=lambda w: w[1] - w[3])  # longest first (stable: a document's windows stay in order)
        first_row = np.cumsum([0] + [len(ids) - 1 for ids in docs])
        budget = self.tokens_per_pass(C, batch_size)  # tokens per forward pass: as many as full windows take
        groups, lo = [], 0
        while lo < len(windows):
            n = max(1, budget // (windows[lo][3] - windows[lo][1]))  # the first window of a group is its longest
            groups.append(windows[lo : lo + n])
            lo += n
        bounds = np.cumsum([0] + [sum(e - f for _, _, f, e in batch) for batch in groups]).tolist()
        vocab = self.vocab_size
        gp_total = torch.zeros(vocab, dtype=torch.float64, device=self.device) if gp else None
        chunk = max(1, min(self.chunk_rows, max(b - a for a, b in zip(bounds, bounds[1:]))))
        direct = self._head.packed is not None
        work = [
            None if direct else self.work.get("logits", chunk, vocab),
            self.work.get("exp", chunk, vocab),
            self.work.get("product", chunk, vocab),
        ]
        # Per-token results, allocated once before the loop (long-lived small tensors allocated between the large
        # temporaries would fragment the heap and make memory grow with the document).
        results = torch.empty(bounds[-1], 4, dtype=torch.float32, device=self.device)
        dest = np.empty(bounds[-1], dtype=np.int64)
        # each batch's windows built as it comes: with --stride 1 all of them at once took a context's tokens per
        # scored token
        for (tokens, index, rows_of), lo_b, hi_b in zip(_packed(docs, groups, bos, first_row), bounds, bounds[1:]):
            dest[lo_b:hi_b] = rows_of
            windows_t = torch.as_tensor(tokens, device=self.device)
            rows_t = torch.as_tensor(index, dtype=torch.long, device=self.device)
            hidden = self._trunk(windows_t).reshape(windows_t.numel(), -1)[rows_t]
            targets = windows_t.reshape(-1)[rows_t + 1]
            for lo in range(0, hi_b - lo_b, chunk):
                h = hidden[lo : lo + chunk]
                n = len(h)
                z = self._head(h, None if direct else work[0][:n])
                *values, psum = position_stats_(z, targets[lo : lo + n], work[1][:n], work[2][:n])
                torch.stack(values, dim=1, out=results[lo_b + lo : lo_b + lo + n])
                if gp_total is not None:
                    gp_total += psum
            scored(hi_b - lo_b)
        gp_sum = None if gp_total is None else gp_total.cpu().numpy()
        rows = np.empty((bounds[-1], 4), dtype=np.float32)
        rows[dest] = results.cpu().numpy()
        return [
            stats_from_rows(ids, rows[first_row[d] : first_row[d + 1]], gp_sum, vocab, C, S)
            for d, ids in enumerate(docs)
        ]


def activation_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """Bytes one window token takes in a forward pass of ``model`` (hidden states and the MLP's inner layer, a few
    of each at once), and per token and position of its window (the attention scores of every head, in float32
    when the attention is computed in full)."""
    config = getattr(model, "config", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None) or 4096
    inner = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * hidden
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None) or 32
    size = next(model.parameters()).element_size()
    return size * (10 * hidden + 4 * inner), 8 * heads


def _packed(docs: list[np.ndarray], groups: list, bos: int | None, first_row: np.ndarray):
    """Per group of windows ``(document, start, first scored, end)``: the token array (right-padded, a BOS first
    when given), the indices of the scored positions in its flattened ``[windows * length]`` trunk output, and
    the rows of the documents' results they fill."""
    shift = int(bos is not None)
    for batch in groups:
        length = batch[0][3] - batch[0][1] + shift
        tokens = np.zeros((len(batch), length), dtype=np.int64)
        if shift:
            tokens[:, 0] = bos
        index, dest = [], []
        for b, (d, s, f, e) in enumerate(batch):
            tokens[b, shift : shift + e - s] = docs[d][s:e]
            index.append(b * length + shift + np.arange(f - 1 - s, e - 1 - s))
            dest.append(first_row[d] + np.arange(f - 1, e - 1))
        yield tokens, np.concatenate(index), np.concatenate(dest)


def _batches(spans, batch_size):
    """Consecutive windows of equal length, at most ``batch_size`` at a time (only the last window is shorter)."""
    batch = []
    for span in spans:
        if batch and (len(batch) == batch_size or span[2] - span[0] != batch[0][2] - batch[0][0]):
            yield batch
            batch = []
        batch.append(span)
    if batch:
        yield batch


def load_transformers(config: ModelConfig, expected_identity: str | None = None) -> LoadedModel:
    """Load the model and tokenizer described by ``config`` (clear errors for unknown ids and bad options).

    With ``expected_identity`` (a classifier's model), a local model whose content differs is refused before any
    of its files are loaded. Model code from the hub runs only with ``config.trust_remote_code``. The returned
    config names the model by a resolvable reference (absolute path; hub commit)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if config.dtype not in DTYPES:
        raise DocauditError(f"unknown dtype '{config.dtype}' (choose from {', '.join(DTYPES)})")
    if config.quantize not in (None, *QUANTIZE):
        raise DocauditError(f"unknown quantization '{config.quantize}' (choose from {', '.join(QUANTIZE)})")
    device = resolve_device(config.device)
    # a memoized hash may be stale or forged: the identity that names the model in every output, and keys its
    # cached statistics, rests on the weights themselves (one more pass over a local model's files per run)
    source = resolve_source(config.model, config.revision, memo=False)
    if not source.hub:
        check_identity(source.identity, expected_identity)
    download = source.hub and hub_access(config.model, config.revision)
    dtype = getattr(torch, config.dtype)
    kwargs = {"revision": config.revision, "trust_remote_code": config.trust_remote_code}
    if source.hub and not download:
        kwargs["local_files_only"] = True
    model_kwargs = dict(kwargs, dtype=dtype)
    if config.quantize:
        model_kwargs["quantization_config"] = _bnb_config(config.quantize, dtype)
        model_kwargs["device_map"] = str(device) if device.type == "cpu" else {"": device.index or 0}
    location = source.location()

    def failed(e: Exception) -> ModelError:
        reason = f" ({first_line(e)})"
        if source.hub and not download:
            where = (
                "not a local path, the Hugging Face hub is unreachable"
                + (" (HF_HUB_OFFLINE is set)" if offline() else "")
                + " and it is not in the local Hugging Face cache"
            )
            reason = "" if isinstance(e, OSError) else reason
        else:
            where = (
                "not a local path, and the Hugging Face hub did not provide it" if source.hub else "could not be loaded"
            )
        return ModelError(f"unknown model '{config.model}': {where}{reason}")

    def weights() -> torch.nn.Module:
        try:
            model = AutoModelForCausalLM.from_pretrained(location, **model_kwargs)
        except (OSError, ValueError) as e:
            raise failed(e) from e
        if not config.quantize:
            model.to(device)
        return model.eval()

    try:
        tokenizer = _embedded_tokenizer(source, location) or AutoTokenizer.from_pretrained(location, **kwargs)
        model_config = AutoConfig.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as e:
        raise failed(e) from e
    identity, resolved = source.identity, replace(config, model=source.reference)
    if source.hub:
        commit = getattr(model_config, "_commit_hash", None)
        identity = f"hub:{config.model}@{commit or config.revision or 'main'}"
        resolved = replace(resolved, revision=commit or config.revision)
        check_identity(identity, expected_identity)
    text_config = getattr(model_config, "get_text_config", lambda: model_config)()
    vocab = getattr(text_config, "vocab_size", None)
    positions = getattr(text_config, "max_position_embeddings", None) or getattr(text_config, "n_positions", None)
    # the weights wait for the first model pass when the configuration gives what the querier needs before it
    model = weights() if not isinstance(vocab, int) or vocab <= 0 else Deferred(weights, vocab, positions)
    return LoadedModel(model, tokenizer, identity, tokenizer_hash(tokenizer), resolved, device)


SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token", "mask_token")


def _embedded_tokenizer(source, location: str):
    """The embedded model's tokenizer, read from the ``tokenizer.json`` of its conversion straight into transformers'
    fast tokenizer with the special tokens its config names (the same ids, special tokens and hash as
    ``AutoTokenizer``'s Gemma class, which first rebuilds the 262,144-entry vocabulary in Python: about three times
    as long; docs/benchmarks.md); None for any other model, or when the files cannot be read (``AutoTokenizer``
    then reads them and says why)."""
    from transformers import PreTrainedTokenizerFast

    from docaudit.untrusted import load_untrusted_json

    folder = Path(location)
    if source.reference is not None or source.gguf is None or not (folder / "tokenizer.json").is_file():
        return None
    try:
        settings = load_untrusted_json(folder / "tokenizer_config.json", "tokenizer config")
        specials = {k: settings[k] for k in SPECIAL_TOKENS if isinstance(settings.get(k), str)}
        return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **specials)
    except Exception:  # any damaged file: AutoTokenizer reads it again and says why
        return None


def _bnb_config(quantize: str, dtype: torch.dtype):
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as e:
        raise ModelError("--quantize needs bitsandbytes: pip install 'docaudit[quant]'") from e
    if quantize == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_type="nf4")


register_backend(
    "transformers",
    provides=FULL,
    load=load_transformers,
    open=lambda lm, query: TransformersBackend(lm.model, lm.vocab_size, lm.device),
    options=("dtype", "quantize", "revision", "trust_remote_code"),
    help="the model loaded with transformers in this process (a hub id, a local folder, a .gguf dequantized once)",
)
