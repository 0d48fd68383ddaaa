"""Controlled experiments: train a small target model on a random half of a document pool.

Membership is assigned at random (``split_members``), so any member/non-member difference the detectors find is
caused by training and not by a difference between the two sets (docs/methods.md, "Blind baseline" and
"Controlled experiments"). ``train_target`` trains a byte-level BPE tokenizer on the whole pool (members and
non-members, so the tokenizer itself carries no membership signal), then a GPT-2 or Llama model from scratch on the
members only, and saves an ordinary Hugging Face model directory. Training is deterministic given the seed,
checkpoints after every epoch and resumes after an interruption.

Layout of ``out_dir``::

    out_dir/model/        the trained model + tokenizer (save_pretrained) and ``docaudit_target.json``
    out_dir/checkpoint/   state after the last finished epoch (model, optimizer, scheduler, RNG, tokenizer)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import pathlib
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from docaudit.config import TargetConfig, check_range
from docaudit.errors import DocauditError
from docaudit.lab.tokenizer import train_tokenizer
from docaudit.outputs import replace_dir
from docaudit.query.models import resolve_device
from docaudit.query.querier import max_positions

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)


METADATA_FILE = "docaudit_target.json"


_STATE_FILE = "state.json"


_TENSORS_FILE = "training_state.pt"


_FORMAT = 1


# Configuration fields that may change between runs without invalidating a checkpoint: a run asked for more
# epochs continues from the last saved epoch.
_EXTENSIBLE = ("epochs",)


def build_model(config: TargetConfig, vocab_size: int, special_token_id: int = 0) -> PreTrainedModel:
    """A randomly initialised GPT-2 or Llama model of the configured size (initialisation seeded by
    ``config.seed``). Input and output embeddings are tied in both architectures."""
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    ids = dict(bos_token_id=special_token_id, eos_token_id=special_token_id, pad_token_id=special_token_id)
    if config.arch == "gpt2":
        hf_config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=config.positions,
            n_embd=config.width,
            n_layer=config.layers,
            n_head=config.heads,
            resid_pdrop=config.dropout,
            embd_pdrop=config.dropout,
            attn_pdrop=config.dropout,
            tie_word_embeddings=True,
            **ids,
        )
    else:
        hf_config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=config.width,
            intermediate_size=4 * config.width,
            num_hidden_layers=config.layers,
            num_attention_heads=config.heads,
            num_key_value_heads=config.heads,
            max_position_embeddings=config.positions,
            attention_dropout=config.dropout,
            tie_word_embeddings=True,
            **ids,
        )
    torch.manual_seed(config.seed)
    return AutoModelForCausalLM.from_config(hf_config)


def _texts_sha256(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def leading_token_ids(tokenizer: PreTrainedTokenizerBase, text: str, max_tokens: int | None) -> list[int]:
    """The document's token ids as the tokenizer encodes it by default (special tokens included), cut to the
    first ``max_tokens``. Long texts are encoded from a prefix that is long enough, which gives the same ids."""
    if max_tokens is None:
        return list(tokenizer(text).input_ids)
    n_chars = max(1024, 16 * max_tokens)
    while True:
        prefix = text[:n_chars]
        ids = list(tokenizer(prefix).input_ids)
        # a cut text changes at most the last few pre-tokens; keep a margin so the leading ids are exact
        if len(prefix) == len(text) or len(ids) > max_tokens + 64:
            return ids[:max_tokens]
        n_chars *= 2


def _token_stream(docs: list[list[int]], separator: int | None) -> torch.Tensor:
    """The documents concatenated into one training stream (with ``separator`` after each, if given)."""
    stream: list[int] = []
    for ids in docs:
        stream.extend(ids)
        if separator is not None:
            stream.append(separator)
    if len(stream) < 2:
        raise DocauditError("the member documents hold too few tokens to train on")
    return torch.tensor(stream, dtype=torch.long)


def _epoch_offset(seed: int, epoch: int, block: int) -> int:
    """Where the first full block starts in epoch ``epoch``: 0 in the first epoch, then a seeded random shift, so
    block boundaries move between epochs and the model learns the text rather than its place in a block."""
    if epoch == 0:
        return 0
    return int(torch.randint(block, (1,), generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch + 7919)))


def _blocks(stream: torch.Tensor, block: int, offset: int, pad_id: int):
    """Cut the stream into blocks of ``block`` tokens, the first one being ``stream[:offset]`` when ``offset``
    > 0; short blocks are right-padded and their padding masked out of attention and loss."""

    def padded(piece):
        ids = torch.full((1, block), pad_id, dtype=torch.long)
        ids[0, : len(piece)] = piece
        mask = torch.zeros((1, block), dtype=torch.long)
        mask[0, : len(piece)] = 1
        return ids, mask

    rest = stream[offset:]
    n_full = len(rest) // block
    blocks = [(rest[: n_full * block].view(n_full, block), torch.ones((n_full, block), dtype=torch.long))]
    if offset:
        blocks.insert(0, padded(stream[:offset]))
    if len(rest) > n_full * block:
        blocks.append(padded(rest[n_full * block :]))
    input_ids = torch.cat([b[0] for b in blocks])
    attention = torch.cat([b[1] for b in blocks])
    labels = input_ids.masked_fill(attention == 0, -100)
    return input_ids, attention, labels


def _n_blocks(n_tokens: int, block: int, offset: int) -> int:
    return (1 if offset else 0) + math.ceil(max(0, n_tokens - offset) / block)


def _identity(config: TargetConfig, member_texts, pool_texts, base_model) -> dict:
    cfg = dataclasses.asdict(config)
    for key in _EXTENSIBLE:
        cfg.pop(key)
    return {
        "format": _FORMAT,
        "config": cfg,
        "members_sha256": _texts_sha256(member_texts),
        "n_members": len(member_texts),
        # the tokenizer is trained on the pool from scratch; a base model brings its own
        "pool_sha256": None if base_model else _texts_sha256(pool_texts),
        "base_model": str(pathlib.Path(base_model).resolve()) if base_model else None,
    }


def _identity_diff(saved: dict, wanted: dict) -> list[str]:
    diff = []
    for key in sorted(set(saved) | set(wanted)):
        if key == "config":
            a, b = saved.get("config", {}), wanted.get("config", {})
            diff += [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif saved.get(key) != wanted.get(key):
            diff.append(f"{key} differs")
    return diff


def _fresh_tmp(path: pathlib.Path) -> pathlib.Path:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def _checkpoint_dir(out_dir: pathlib.Path) -> pathlib.Path | None:
    """The latest complete checkpoint (``checkpoint``, or ``checkpoint.old`` after a crash between renames)."""
    for name in ("checkpoint", "checkpoint.old"):
        path = out_dir / name
        if (path / _STATE_FILE).is_file() and (path / _TENSORS_FILE).is_file():
            return path
    return None


def _save_checkpoint(out_dir, model, tokenizer, optimizer, scheduler, state: dict) -> None:
    final = out_dir / "checkpoint"
    tmp = _fresh_tmp(final)
    tmp.mkdir(parents=True)
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng,
            "python_rng": random.getstate(),
        },
        tmp / _TENSORS_FILE,
    )
    tokenizer.save_pretrained(tmp / "tokenizer")
    (tmp / _STATE_FILE).write_text(json.dumps(state, indent=1))
    replace_dir(tmp, final)


def _read_json(path: pathlib.Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_target_metadata(model_dir: str | os.PathLike) -> dict:
    """The training record saved beside a trained target: identity (configuration and hashes of the member and
    pool texts), ``epochs_done``, per-epoch losses, ``segments`` (one ``{"start_epoch", "end_epoch", "seconds"}``
    per call that trained) and the member/non-member split it was trained for."""
    meta = _read_json(pathlib.Path(model_dir) / METADATA_FILE)
    if meta is None:
        raise DocauditError(f"{model_dir} is not a docaudit target model (no readable {METADATA_FILE})")
    return meta


def _schedule(warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


@dataclass
class _Run:
    """One training run: the tokenizer, the model and its optimizer state, the members as one token stream, the
    block offset and number of optimizer steps of every epoch, and the record kept in checkpoints."""

    out_dir: pathlib.Path
    config: TargetConfig
    identity: dict
    device: torch.device
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    stream: torch.Tensor
    adds_bos: bool
    pad_id: int
    offsets: list[int]
    steps: list[int]
    start_epoch: int = 0
    history: list[dict] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)
    running: float | None = None  # running mean of the batch losses, shown on the progress bar

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole run (all ``config.epochs`` epochs)."""
        return sum(self.steps)


_RENAMED = {"context": "positions", "max_tokens": "doc_tokens"}  # configuration fields saved under older names


def _renamed(identity: dict | None) -> dict | None:
    """A saved identity with the configuration fields under their current names (``context`` and ``max_tokens``
    were renamed ``positions`` and ``doc_tokens``), so a checkpoint written under the old names still resumes."""
    if identity is None or "config" not in identity:
        return identity
    config = {_RENAMED.get(k, k): v for k, v in identity["config"].items()}
    return {**identity, "config": config}


def _resume_point(out_dir: pathlib.Path, done: dict | None, config: TargetConfig, identity: dict):
    """The checkpoint to continue from and its state, ``(None, None)`` to start afresh. A checkpoint of another
    training run, one with more epochs than asked for, or (without a checkpoint) a finished model of another
    training run is refused."""
    ckpt = _checkpoint_dir(out_dir)
    state = _read_json(ckpt / _STATE_FILE) if ckpt else None
    if state is not None:
        diff = _identity_diff(_renamed(state["identity"]), identity)
        if diff:
            raise DocauditError(
                f"{out_dir} holds a checkpoint of a different training run ({'; '.join(diff)}); "
                "use another output directory or delete the checkpoint"
            )
        if state["epochs_done"] > config.epochs:
            raise DocauditError(
                f"the checkpoint in {out_dir} has already trained {state['epochs_done']} epochs, more than the "
                f"{config.epochs} asked for; use another output directory"
            )
    elif done is not None and _renamed(done.get("identity")) != identity:
        raise DocauditError(
            f"{out_dir / 'model'} holds a different target model "
            f"({'; '.join(_identity_diff(_renamed(done['identity']), identity))})"
            " and there is no checkpoint to continue; use another output directory"
        )
    return (ckpt, state) if state is not None else (None, None)


def _tokenizer_and_model(pool_texts: list[str], config: TargetConfig, base_model: str | None, ckpt):
    """The tokenizer (from the checkpoint, the base model, or trained on the pool) and the model (the base model,
    or a fresh one seeded by ``config.seed``). A base model must take ``config.positions`` positions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if ckpt is not None:
        tokenizer = AutoTokenizer.from_pretrained(ckpt / "tokenizer")
    elif base_model:
        tokenizer = AutoTokenizer.from_pretrained(base_model)
    else:
        log.info("training a %d-token BPE tokenizer on %d documents", config.vocab_size, len(pool_texts))
        tokenizer = train_tokenizer(pool_texts, config.vocab_size)
    if base_model:
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_pretrained(base_model, trust_remote_code=False)
        limit = max_positions(model)
        check_range("--positions", config.positions, 2, limit, f"the base model takes {limit} positions")
    else:
        model = build_model(config, len(tokenizer), special_token_id=tokenizer.bos_token_id)
    return tokenizer, model


def _restore(run: _Run, ckpt: pathlib.Path, state: dict) -> None:
    """Load the model, optimizer, scheduler and random states saved in ``ckpt`` and the record of the epochs done."""
    saved = torch.load(ckpt / _TENSORS_FILE, map_location=run.device, weights_only=True)
    run.model.load_state_dict(saved["model"])
    run.optimizer.load_state_dict(saved["optimizer"])
    run.scheduler.load_state_dict(saved["scheduler"])
    torch.set_rng_state(saved["rng"]["torch"].cpu())
    if "cuda" in saved["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([r.cpu() for r in saved["rng"]["cuda"]])
    random.setstate(saved["python_rng"])
    run.start_epoch, run.history, run.segments = state["epochs_done"], state["history"], state["segments"]
    if state["total_steps"] != run.total_steps:
        # more epochs asked for: the scheduler was built for the new total; continue on that stretched schedule
        for group, lam in zip(run.optimizer.param_groups, run.scheduler.lr_lambdas):
            group["lr"] = group["initial_lr"] * lam(run.scheduler.last_epoch)
    log.info("resuming target training at epoch %d of %d from %s", run.start_epoch, run.config.epochs, ckpt)


def _prepare(
    member_texts: list[str],
    pool_texts: list[str],
    out_dir: pathlib.Path,
    config: TargetConfig,
    identity: dict,
    base_model: str | None,
    device: torch.device,
    ckpt: pathlib.Path | None,
    state: dict | None,
) -> _Run:
    """Everything a run needs before its first epoch: tokenizer and model on ``device``, the members' leading
    ``config.doc_tokens`` tokens as one stream, the block offsets and steps of every epoch, AdamW with the
    warmup-cosine schedule over all of them; then the checkpoint's state, or the seeded random state of a fresh
    run."""
    tokenizer, model = _tokenizer_and_model(pool_texts, config, base_model, ckpt)
    model.to(device)

    docs = [leading_token_ids(tokenizer, t, config.doc_tokens) for t in member_texts]
    adds_bos = tokenizer.bos_token_id is not None and all(d and d[0] == tokenizer.bos_token_id for d in docs)
    separator = None if adds_bos else tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    stream = _token_stream(docs, separator)
    offsets = [_epoch_offset(config.seed, e, config.positions) for e in range(config.epochs)]
    steps = [math.ceil(_n_blocks(len(stream), config.positions, o) / config.batch_size) for o in offsets]
    total_steps = sum(steps)
    warmup = max(1, int(round(config.warmup_fraction * total_steps)))

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
        betas=(0.9, 0.95),
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(warmup, total_steps))
    run = _Run(
        out_dir,
        config,
        identity,
        device,
        tokenizer,
        model,
        optimizer,
        scheduler,
        stream,
        adds_bos,
        pad_id,
        offsets,
        steps,
    )
    if state is not None:
        _restore(run, ckpt, state)
    else:
        torch.manual_seed(config.seed)
        random.seed(config.seed)
    return run


def _run_epoch(run: _Run, epoch: int, bar) -> float:
    """Train one epoch (epochs count from 0): the stream cut at this epoch's offset, the blocks in a seeded
    shuffle, one optimizer step per batch. Returns the mean loss per predicted token."""
    config, dev = run.config, run.device
    input_ids, attention, labels = _blocks(run.stream, config.positions, run.offsets[epoch], run.pad_id)
    n_blocks = input_ids.shape[0]
    order = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(config.seed * 1_000_003 + epoch))
    loss_sum, tok_sum = 0.0, 0
    for first in range(0, n_blocks, config.batch_size):
        idx = order[first : first + config.batch_size]
        batch_labels = labels[idx].to(dev)
        out = run.model(input_ids=input_ids[idx].to(dev), attention_mask=attention[idx].to(dev), labels=batch_labels)
        run.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), 1.0)
        run.optimizer.step()
        run.scheduler.step()
        n_pred = int((batch_labels[:, 1:] != -100).sum())
        batch_loss = float(out.loss.detach())
        loss_sum += batch_loss * n_pred
        tok_sum += n_pred
        run.running = batch_loss if run.running is None else 0.9 * run.running + 0.1 * batch_loss
        bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{run.running:.3f}")
    return loss_sum / max(1, tok_sum)


def _checkpoint_state(run: _Run, epochs_done: int) -> dict:
    """The record saved with a checkpoint: identity, epochs done and planned, steps, losses and segments."""
    return {
        "identity": run.identity,
        "epochs_done": epochs_done,
        "epochs_planned": run.config.epochs,
        "total_steps": run.total_steps,
        "history": run.history,
        "segments": run.segments,
    }


def _save_model(run: _Run, model_dir: pathlib.Path) -> pathlib.Path:
    """Save the trained model, its tokenizer and the training record (``METADATA_FILE``) as ``model_dir``,
    replacing it whole."""
    run.model.eval()
    tmp = _fresh_tmp(model_dir)
    run.model.save_pretrained(tmp)
    run.tokenizer.save_pretrained(tmp)
    meta = {
        "identity": run.identity,
        "epochs_done": run.config.epochs,
        "config": dataclasses.asdict(run.config),
        "history": run.history,
        "segments": run.segments,
        "n_train_tokens": len(run.stream),
        "context": run.config.positions,
        "adds_bos": run.adds_bos,
        "device": str(run.device),
    }
    (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=1))
    run.out_dir.mkdir(parents=True, exist_ok=True)
    replace_dir(tmp, model_dir)
    return model_dir


def train_target(
    member_texts: list[str],
    pool_texts: list[str],
    out_dir: str | os.PathLike,
    config: TargetConfig,
    base_model: str | None = None,
    progress: bool = True,
    *,
    device: str = "auto",
    on_epoch_end: Callable[[int, float], None] | None = None,
) -> pathlib.Path:
    """Train a target model on ``member_texts`` and save it as a Hugging Face directory ``out_dir/model``.

    - Tokenizer: byte-level BPE trained on ``pool_texts`` (all documents of the experiment, members and
      non-members); with ``base_model`` (a local Hugging Face directory) that model and its own tokenizer are
      trained further instead (continued pretraining, same loop; ``arch``/``layers``/``width``/``heads``/
      ``vocab_size`` are then ignored and ``positions`` beyond the model's positions are refused).
    - Data: the leading ``config.doc_tokens`` tokens of each member, concatenated and cut into blocks of
      ``config.positions`` tokens (an EOS is inserted between documents when the tokenizer adds no BOS). The block
      boundaries shift by a seeded random offset every epoch after the first, so the model memorizes the text
      itself and not its position in a block (a querier's windows never line up with the training blocks).
    - Optimisation: AdamW, linear warmup then cosine decay to 10%, gradient clipping at 1.0, a seeded shuffle of
      the blocks per epoch. Deterministic given ``config.seed`` on a given device (``device``: as for
      ``--device``, ``auto`` picks a CUDA GPU when there is one).
    - Checkpoints: after every epoch, atomically under ``out_dir/checkpoint``. A new call with the same
      configuration and texts resumes from it; a call asking for more ``epochs`` (all else equal) continues from
      the last saved epoch (the cosine schedule is then stretched to the new total). A checkpoint of another
      configuration or other texts is refused with a DocauditError.
    - If ``out_dir/model`` already holds this exact training, it is returned without training.

    ``on_epoch_end(epoch, mean_loss)`` is called after each epoch's checkpoint is saved (epochs count from 1).
    """
    from tqdm.auto import tqdm

    out_dir = pathlib.Path(out_dir)
    member_texts, pool_texts = list(member_texts), list(pool_texts)
    if not member_texts:
        raise DocauditError("no member documents to train the target model on")
    identity = _identity(config, member_texts, pool_texts, base_model)
    model_dir = out_dir / "model"
    done = _read_json(model_dir / METADATA_FILE)
    if done is not None and (model_dir / "config.json").is_file():
        if _renamed(done.get("identity")) == identity and done.get("epochs_done") == config.epochs:
            log.info("target model in %s is complete; not training again", model_dir)
            return model_dir
    ckpt, state = _resume_point(out_dir, done, config, identity)
    run = _prepare(member_texts, pool_texts, out_dir, config, identity, base_model, resolve_device(device), ckpt, state)

    segment = {"start_epoch": run.start_epoch, "end_epoch": run.start_epoch, "seconds": 0.0}
    run.segments.append(segment)
    t0 = time.perf_counter()
    run.model.train()
    bar = tqdm(
        total=run.total_steps,
        initial=sum(run.steps[: run.start_epoch]),
        desc="training target",
        unit="step",
        disable=not progress,
    )
    try:
        for epoch in range(run.start_epoch, config.epochs):
            epoch_loss = _run_epoch(run, epoch, bar)
            run.history.append({"epoch": epoch + 1, "loss": epoch_loss})
            segment["end_epoch"] = epoch + 1
            segment["seconds"] = round(time.perf_counter() - t0, 3)
            _save_checkpoint(
                out_dir, run.model, run.tokenizer, run.optimizer, run.scheduler, _checkpoint_state(run, epoch + 1)
            )
            log.info("target epoch %d/%d: loss %.4f", epoch + 1, config.epochs, epoch_loss)
            if on_epoch_end is not None:
                on_epoch_end(epoch + 1, epoch_loss)
    finally:
        bar.close()
    return _save_model(run, model_dir)
