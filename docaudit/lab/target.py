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

import json
import logging
import math
import os
import pathlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from docaudit.config import TargetConfig, check_range
from docaudit.errors import DocauditError
from docaudit.lab.blocks import blocks, epoch_offset, leading_token_ids, n_blocks, token_stream
from docaudit.lab.checkpoints import (
    METADATA_FILE,
    TENSORS_FILE,
    fresh_tmp,
    identity_of,
    read_json,
    read_target_metadata,
    renamed,
    resume_point,
    save_checkpoint,
)
from docaudit.lab.tokenizer import train_tokenizer
from docaudit.outputs import replace_dir
from docaudit.query.models import resolve_device
from docaudit.query.querier import max_positions
from docaudit.run import RunContext
from docaudit.untrusted import open_untrusted

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

__all__ = ["METADATA_FILE", "build_model", "leading_token_ids", "read_target_metadata", "train_target"]


def build_model(config: TargetConfig, vocab_size: int, seed: int, special_token_id: int = 0) -> PreTrainedModel:
    """A randomly initialised GPT-2 or Llama model of the configured size (initialisation seeded by the run's
    ``seed``). Input and output embeddings are tied in both architectures."""
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
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(hf_config)


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
    def seed(self) -> int:
        """The run's seed, as its identity records it."""
        return self.identity["config"]["seed"]

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole run (all ``config.epochs`` epochs)."""
        return sum(self.steps)


def _tokenizer_and_model(pool_texts: list[str], config: TargetConfig, seed: int, base_model: str | None, ckpt):
    """The tokenizer (from the checkpoint, the base model, or trained on the pool) and the model (the base model,
    or a fresh one seeded by ``seed``). A base model must take ``config.positions`` positions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if ckpt is not None:
        tokenizer = AutoTokenizer.from_pretrained(ckpt / "tokenizer")
    elif base_model:
        tokenizer = AutoTokenizer.from_pretrained(base_model)
    else:
        log.info("training a %d-token BPE tokenizer on %d documents", config.vocab_size, len(pool_texts))
        tokenizer = train_tokenizer(pool_texts, config.vocab_size)
    if base_model:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(base_model, trust_remote_code=False)
        limit = max_positions(model)
        check_range("--positions", config.positions, 2, limit, f"the base model takes {limit} positions")
    else:
        model = build_model(config, len(tokenizer), seed, special_token_id=tokenizer.bos_token_id)
    return tokenizer, model


def _restore(run: _Run, ckpt: pathlib.Path, state: dict) -> None:
    """Load the model, optimizer, scheduler and random states saved in ``ckpt`` and the record of the epochs done."""
    try:
        with open_untrusted(ckpt / TENSORS_FILE, "checkpoint") as f:
            saved = torch.load(f, map_location=run.device, weights_only=True)
    except OSError as e:
        raise DocauditError(f"cannot resume from {ckpt}: {e.strerror or e}") from None
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
    resume: tuple[pathlib.Path, dict] | None,
) -> _Run:
    """Everything a run needs before its first epoch: tokenizer and model on ``device``, the members' leading
    ``config.doc_tokens`` tokens as one stream, the block offsets and steps of every epoch, AdamW with the
    warmup-cosine schedule over all of them; then the state of the checkpoint to ``resume`` from (its folder and
    record), or the seeded random state of a fresh run (the seed: the one ``identity`` records)."""
    ckpt, seed = None if resume is None else resume[0], identity["config"]["seed"]
    tokenizer, model = _tokenizer_and_model(pool_texts, config, seed, base_model, ckpt)
    model.to(device)

    docs = [leading_token_ids(tokenizer, t, config.doc_tokens) for t in member_texts]
    adds_bos = tokenizer.bos_token_id is not None and all(d and d[0] == tokenizer.bos_token_id for d in docs)
    separator = None if adds_bos else tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    stream = token_stream(docs, separator)
    offsets = [epoch_offset(seed, e, config.positions) for e in range(config.epochs)]
    steps = [math.ceil(n_blocks(len(stream), config.positions, o) / config.batch_size) for o in offsets]
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
    if resume is not None:
        _restore(run, *resume)
    else:
        torch.manual_seed(seed)
        random.seed(seed)
    return run


def _run_epoch(run: _Run, epoch: int, bar) -> float:
    """Train one epoch (epochs count from 0): the stream cut at this epoch's offset, the blocks in a seeded
    shuffle, one optimizer step per batch. Returns the mean loss per predicted token."""
    config, dev = run.config, run.device
    input_ids, attention, labels = blocks(run.stream, config.positions, run.offsets[epoch], run.pad_id)
    count = input_ids.shape[0]
    order = torch.randperm(count, generator=torch.Generator().manual_seed(run.seed * 1_000_003 + epoch))
    loss_sum, tok_sum = 0.0, 0
    for first in range(0, count, config.batch_size):
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
    tmp = fresh_tmp(model_dir)
    run.model.save_pretrained(tmp)
    run.tokenizer.save_pretrained(tmp)
    meta = {
        "identity": run.identity,
        "epochs_done": run.config.epochs,
        "config": run.config.used(run.seed),
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
    context: RunContext = RunContext(progress=True),
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
      the blocks per epoch. Deterministic given ``context.seed`` (the run's seed) on a given device (``device``:
      as for ``--device``, ``auto`` picks a CUDA GPU when there is one); ``context.progress`` shows a bar.
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
    identity = identity_of(config, member_texts, pool_texts, base_model, context.seed)
    model_dir = out_dir / "model"
    done = read_json(model_dir / METADATA_FILE)
    if done is not None and (model_dir / "config.json").is_file():
        if renamed(done.get("identity")) == identity and done.get("epochs_done") == config.epochs:
            log.info("target model in %s is complete; not training again", model_dir)
            return model_dir
    resume = resume_point(out_dir, done, config, identity)
    run = _prepare(member_texts, pool_texts, out_dir, config, identity, base_model, resolve_device(device), resume)

    segment = {"start_epoch": run.start_epoch, "end_epoch": run.start_epoch, "seconds": 0.0}
    run.segments.append(segment)
    t0 = time.perf_counter()
    run.model.train()
    bar = tqdm(
        total=run.total_steps,
        initial=sum(run.steps[: run.start_epoch]),
        desc="training target",
        unit="step",
        disable=not context.progress,
    )
    try:
        for epoch in range(run.start_epoch, config.epochs):
            epoch_loss = _run_epoch(run, epoch, bar)
            run.history.append({"epoch": epoch + 1, "loss": epoch_loss})
            segment["end_epoch"] = epoch + 1
            segment["seconds"] = round(time.perf_counter() - t0, 3)
            save_checkpoint(
                out_dir, run.model, run.tokenizer, run.optimizer, run.scheduler, _checkpoint_state(run, epoch + 1)
            )
            log.info("target epoch %d/%d: loss %.4f", epoch + 1, config.epochs, epoch_loss)
            if on_epoch_end is not None:
                on_epoch_end(epoch + 1, epoch_loss)
    finally:
        bar.close()
    return _save_model(run, model_dir)
