"""The lab target's record on disk: the identity of a training run (configuration and hashes of the texts), the
checkpoint saved after every epoch, where a new call resumes, and the training record saved beside the model."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import shutil

import torch

from docaudit.config import TargetConfig
from docaudit.errors import DocauditError
from docaudit.outputs import aside_path, process_alive, replace_dir
from docaudit.untrusted import load_untrusted_json

METADATA_FILE = "docaudit_target.json"


STATE_FILE = "state.json"


TENSORS_FILE = "training_state.pt"


_FORMAT = 1


# Configuration fields that may change between runs without invalidating a checkpoint: a run asked for more
# epochs continues from the last saved epoch.
EXTENSIBLE = ("epochs",)


def _texts_sha256(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def identity_of(config: TargetConfig, member_texts, pool_texts, base_model, seed: int) -> dict:
    """What identifies a training run: its configuration (less ``EXTENSIBLE`` fields) with its ``seed``, hashes of
    the member and pool texts, and the base model."""
    cfg = config.used(seed)
    for key in EXTENSIBLE:
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


def identity_diff(saved: dict, wanted: dict) -> list[str]:
    diff = []
    for key in sorted(set(saved) | set(wanted)):
        if key == "config":
            a, b = saved.get("config", {}), wanted.get("config", {})
            diff += [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif saved.get(key) != wanted.get(key):
            diff.append(f"{key} differs")
    return diff


def fresh_tmp(path: pathlib.Path) -> pathlib.Path:
    """An empty place to write ``path``'s next version, ``NAME.tmp-PID``; the ones of this process and of runs
    that were killed (their process is gone) are removed."""
    for tmp in path.parent.glob(f"{path.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and (int(pid) == os.getpid() or not process_alive(int(pid))) and not tmp.is_symlink():
            shutil.rmtree(tmp)
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def checkpoint_dir(out_dir: pathlib.Path) -> pathlib.Path | None:
    """The latest complete checkpoint: ``checkpoint``, or the previous one kept aside when a run was killed while
    replacing it (``outputs.aside_path``)."""
    for path in (out_dir / "checkpoint", aside_path(out_dir / "checkpoint")):
        if (path / STATE_FILE).is_file() and (path / TENSORS_FILE).is_file():
            return path
    return None


def save_checkpoint(out_dir, model, tokenizer, optimizer, scheduler, state: dict) -> None:
    final = out_dir / "checkpoint"
    tmp = fresh_tmp(final)
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
        tmp / TENSORS_FILE,
    )
    tokenizer.save_pretrained(tmp / "tokenizer")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))
    replace_dir(tmp, final)


def read_json(path: pathlib.Path) -> dict | None:
    try:
        return load_untrusted_json(path, "lab record")
    except (OSError, ValueError, RecursionError):
        return None


def read_target_metadata(model_dir: str | os.PathLike) -> dict:
    """The training record saved beside a trained target: identity (configuration and hashes of the member and
    pool texts), ``epochs_done``, per-epoch losses, ``segments`` (one ``{"start_epoch", "end_epoch", "seconds"}``
    per call that trained) and the member/non-member split it was trained for."""
    meta = read_json(pathlib.Path(model_dir) / METADATA_FILE)
    if meta is None:
        raise DocauditError(f"{model_dir} is not a docaudit target model (no readable {METADATA_FILE})")
    return meta


_RENAMED = {"context": "positions", "max_tokens": "doc_tokens"}  # configuration fields saved under older names


def renamed(identity: dict | None) -> dict | None:
    """A saved identity with the configuration fields under their current names (``context`` and ``max_tokens``
    were renamed ``positions`` and ``doc_tokens``), so a checkpoint written under the old names still resumes."""
    if identity is None or "config" not in identity:
        return identity
    config = {_RENAMED.get(k, k): v for k, v in identity["config"].items()}
    return {**identity, "config": config}


def resume_point(out_dir: pathlib.Path, done: dict | None, config: TargetConfig, identity: dict):
    """The checkpoint to continue from and its state, None to start afresh. A checkpoint of another
    training run, one with more epochs than asked for, or (without a checkpoint) a finished model of another
    training run is refused."""
    ckpt = checkpoint_dir(out_dir)
    state = read_json(ckpt / STATE_FILE) if ckpt else None
    if state is not None:
        diff = identity_diff(renamed(state["identity"]), identity)
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
    elif done is not None and renamed(done.get("identity")) != identity:
        raise DocauditError(
            f"{out_dir / 'model'} holds a different target model "
            f"({'; '.join(identity_diff(renamed(done['identity']), identity))})"
            " and there is no checkpoint to continue; use another output directory"
        )
    return (ckpt, state) if state is not None else None
