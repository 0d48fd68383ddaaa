"""Continued pretraining in which each member is seen a chosen number of times.

The lab's ``train_target`` trains every member for the same number of epochs and checkpoints once per epoch; the
study needs members seen 1, 2, 5 or 10 times in one run, the tied (262k-row, for Gemma) embedding frozen, and a
checkpoint every few optimizer steps (one pass is the whole run). The data follow the lab's layout
(``leading_token_ids``: each member's leading tokens as the tokenizer encodes them, BOS included; an EOS between
documents when the tokenizer adds no BOS): every member appears ``exposures`` times, the copies are shuffled with
the seed, concatenated into one stream and cut into blocks of ``block`` tokens, trained in stream order.
Optimisation: AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), linear warmup then cosine decay to 0, gradient
clipping at 1.0. The checkpoint holds the trainable weights, optimizer, scheduler and step (atomic replace)."""

from __future__ import annotations

import json
import logging
import math
import os
import pathlib
import random
import time
from dataclasses import asdict, dataclass

import torch

from docaudit.outputs import replace_dir
from docaudit.query.models import resolve_device

log = logging.getLogger("study.train")


@dataclass(frozen=True)
class TrainPlan:
    """What is trained and how (written beside the checkpoint; a checkpoint of another plan is refused)."""

    learning_rate: float
    block: int
    batch_size: int
    warmup_fraction: float
    checkpoint_every: int
    seed: int
    freeze_embeddings: bool = True


def exposure_stream(docs: dict[str, list[int]], exposures: dict[str, int], seed: int, eos: int | None) -> list[int]:
    """Each document's ids repeated ``exposures[id]`` times, the copies shuffled (seeded) and concatenated (with
    ``eos`` after each when given)."""
    copies = [i for i in sorted(docs) for _ in range(exposures[i])]
    random.Random(seed).shuffle(copies)
    stream: list[int] = []
    for i in copies:
        stream.extend(docs[i])
        if eos is not None:
            stream.append(eos)
    return stream


def blocks(stream: list[int], block: int, pad_id: int):
    """``(input_ids, attention, labels)``: the stream cut into rows of ``block`` tokens, the last one padded and its
    padding masked out of attention and loss."""
    n = math.ceil(len(stream) / block)
    ids = torch.full((n, block), pad_id, dtype=torch.long)
    flat = torch.tensor(stream, dtype=torch.long)
    ids.view(-1)[: len(stream)] = flat
    attention = torch.zeros((n, block), dtype=torch.long)
    attention.view(-1)[: len(stream)] = 1
    return ids, attention, ids.masked_fill(attention == 0, -100)


def _save(ckpt: pathlib.Path, model, optimizer, scheduler, state: dict) -> None:
    tmp = ckpt.with_name(f"{ckpt.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    trainable = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
    torch.save(
        {"model": trainable, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
        tmp / "state.pt",
    )
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    replace_dir(tmp, ckpt)


def continue_pretraining(
    base: str,
    docs: dict[str, list[int]],
    exposures: dict[str, int],
    out: pathlib.Path,
    plan: TrainPlan,
    device: str,
    dtype: str,
) -> pathlib.Path:
    """Train ``base`` (a local Hugging Face folder) further on the exposure stream; save the model and tokenizer as
    ``out/model`` and return it. Resumes from ``out/checkpoint``; returns at once when ``out/model`` is complete."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup

    model_dir, ckpt = out / "model", out / "checkpoint"
    identity = {"plan": asdict(plan), "base": str(base), "exposures": exposures, "n_tokens": {}}
    identity["n_tokens"] = {i: len(d) for i, d in sorted(docs.items())}
    if (model_dir / "study_train.json").is_file():
        return model_dir
    tokenizer = AutoTokenizer.from_pretrained(base)
    adds_bos = tokenizer.bos_token_id is not None and all(d and d[0] == tokenizer.bos_token_id for d in docs.values())
    stream = exposure_stream(docs, exposures, plan.seed, None if adds_bos else tokenizer.eos_token_id)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    input_ids, attention, labels = blocks(stream, plan.block, pad_id)
    total = math.ceil(len(input_ids) / plan.batch_size)

    torch.manual_seed(plan.seed)
    dev = resolve_device(device)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, trust_remote_code=False).to(dev)
    if plan.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=plan.learning_rate,
        betas=(0.9, 0.95),
    )
    warmup = max(1, round(plan.warmup_fraction * total))
    scheduler = get_cosine_schedule_with_warmup(optimizer, warmup, total)
    state = {"identity": identity, "step": 0, "total_steps": total, "n_stream_tokens": len(stream), "losses": []}
    saved = json.loads((ckpt / "state.json").read_text()) if (ckpt / "state.json").is_file() else None
    if saved is not None:
        if saved["identity"] != identity:
            raise SystemExit(f"error: {ckpt} holds a checkpoint of another training run; use another --out")
        tensors = torch.load(ckpt / "state.pt", map_location=dev, weights_only=True)
        model.load_state_dict(tensors["model"], strict=False)
        optimizer.load_state_dict(tensors["optimizer"])
        scheduler.load_state_dict(tensors["scheduler"])
        state = saved
        log.info("resuming continued pretraining at step %d of %d", state["step"], total)
    autocast = dev.type == "cuda" and dtype == "bfloat16"
    model.train()
    t0 = time.perf_counter()
    for step in range(state["step"], total):
        rows = slice(step * plan.batch_size, (step + 1) * plan.batch_size)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            loss = model(
                input_ids=input_ids[rows].to(dev), attention_mask=attention[rows].to(dev), labels=labels[rows].to(dev)
            ).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([*decay, *rest], 1.0)
        optimizer.step()
        scheduler.step()
        state["losses"].append(round(float(loss.detach()), 5))
        state["step"] = step + 1
        log.info(
            "step %d/%d loss %.4f lr %.2e (%.1f s since start)",
            step + 1,
            total,
            state["losses"][-1],
            scheduler.get_last_lr()[0],
            time.perf_counter() - t0,
        )
        if state["step"] % plan.checkpoint_every == 0 or state["step"] == total:
            _save(ckpt, model, optimizer, scheduler, state)
    model.eval()
    tmp = model_dir.with_name(f"{model_dir.name}.tmp-{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "study_train.json").write_text(json.dumps(state, indent=1))
    replace_dir(tmp, model_dir)
    return model_dir
