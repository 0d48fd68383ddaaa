"""The one envelope of every JSON output: which schema it follows, which docaudit made it, with which command and
when, from which documents (by the SHA-256 of the text as queried), with which model (by content, on which device)
and in which environment, with which seed; then the results (docs/outputs.md).

Built here only: the writers of ``docaudit.report``, the lab and the command line's ``--format json`` all call
:func:`envelope`. The results say where their documents and model are: an ``info`` mapping with ``inputs`` and
``model`` entries (:func:`document_records`, :func:`model_record`), or a :class:`Rows` list that carries them.
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from importlib import metadata

from docaudit import __version__
from docaudit.outputs import command_line

SCHEMA_VERSION = "1.0"

# the libraries whose versions every output records (those installed), looked up without importing them
LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "scikit-learn",
    "numpy",
    "scipy",
    "pandas",
    "skops",
    "llama-cpp-python",
    "gguf",
    "bitsandbytes",
    "ray",
)

# the output kind (schema name) of each command's printed JSON; a file's kind is given by its writer
COMMAND_SCHEMAS = {
    "audit": "audit",
    "train": "train",
    "predict": "predict",
    "lab": "lab",
    "dataset-test": "dataset-test",
    "data-check": "data-check",
    "traps-make": "traps-make",
    "traps-detect": "traps-detect",
    "controls": "controls",
    "probe": "probe",
    "extract": "extract",
    "evaluate": "evaluation",
    "score": "score",
    "sequence": "sequence",
    "report": "report",
    "map": "map",
    "config-show": "config-show",
    "cache-info": "cache-info",
}

ENVELOPE_KEYS = ("schema", "docaudit_version", "command", "created", "inputs", "model", "environment", "seed")


class Rows(list):
    """Result rows (a list, as JSON an array) that also carry their provenance: the documents they came from
    (``inputs``), the model (``model``) and the seed, for :func:`envelope`."""

    def __init__(self, rows=(), inputs: list[dict] | None = None, model: dict | None = None, seed=None):
        super().__init__(rows)
        self.inputs, self.model, self.seed = inputs, model, seed


def environment() -> dict:
    """Python's version and implementation, the platform, and the version of each of :data:`LIBRARIES` that is
    installed (from the package metadata: nothing is imported)."""
    libraries = {}
    for name in LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(terse=True),
        "libraries": libraries,
    }


def document_records(docs, roles=None, tokens: dict | None = None) -> list[dict]:
    """One record per document (anything with ``id``, ``path``, ``sha256``): its path, id, the SHA-256 of its text
    as read for querying (after cleaning; an excerpt's when ``docs`` are excerpts) and, where ``tokens`` (path →
    (queried, total)) says, the tokens queried and in total; with ``roles`` (one for all, one per document, or
    labels: 1 = ``member``, 0 = ``non-member``) its role."""
    tokens = tokens or {}
    if roles is None or isinstance(roles, str):
        roles = [roles] * len(docs)
    roles = [_role(r) for r in roles]
    records = []
    for d, role in zip(docs, roles):
        queried, total = tokens.get(str(d.path), (None, None))
        records.append(
            {
                "path": str(d.path),
                "id": d.id,
                "sha256": d.sha256,
                **({"role": role} if role is not None else {}),
                "tokens_queried": queried,
                "tokens_total": total,
            }
        )
    return records


def _role(role) -> str | None:
    if role is None or isinstance(role, str):
        return role
    return "member" if int(role) == 1 else "non-member"


def queried_tokens(docs, stats, max_tokens: int | None = None, whole: bool = True) -> dict:
    """``tokens`` for :func:`document_records` from each document's query statistics: their ``n_tokens`` queried,
    and as the total the same where the whole document was queried (``whole``, and fewer tokens than a
    ``max_tokens`` excerpt: the rule of ``audit.meta.total_tokens``), else unknown."""
    tokens = {}
    for d, s in zip(docs, stats):
        n = int(s.n_tokens)
        tokens[str(d.path)] = (n, n if whole and (max_tokens is None or n < max_tokens) else None)
    return tokens


def model_record(lm) -> dict:
    """A loaded model (``query.models.LoadedModel``) as an output records it: the id or path it was loaded from, its
    identity (the weights' SHA-256 prefix for a local model or GGUF file, the commit for a hub model), the revision,
    the tokenizer's hash, the backend, dtype and quantization (a GGUF file's own: ``gguf``; a server's: unknown,
    null), and the device actually used (``server`` for a model queried through a server)."""
    config = lm.config
    local = config.backend == "transformers"
    return {
        "id": config.model,
        "identity": lm.identity,
        "revision": config.revision,
        "tokenizer_hash": lm.tokenizer_hash,
        "backend": config.backend,
        "dtype": config.dtype if local else None,
        "quantization": config.quantize if local else {"llamacpp": "gguf"}.get(config.backend),
        "device": "server" if config.backend == "openai" else str(lm.device),
        **({"api_base": config.api_base} if config.backend == "openai" else {}),
    }


def _lift(results) -> tuple[dict, dict]:
    """``results`` as a mapping (rows under ``rows``) without the provenance it carries, and that provenance:
    from a :class:`Rows` (itself or a value of the mapping) and from an ``info`` mapping's ``inputs`` and ``model``
    entries (and its ``seed`` and the ``command`` that made it)."""
    found: dict = {}

    def take(rows):
        if isinstance(rows, Rows):
            for key in ("inputs", "model", "seed"):
                if getattr(rows, key) is not None:
                    found.setdefault(key, getattr(rows, key))

    if not isinstance(results, dict):
        take(results)
        return {"rows": list(results)}, found
    results = dict(results)
    for value in results.values():
        take(value)
    if isinstance(results.get("inputs"), list):
        found.setdefault("inputs", results.pop("inputs"))
    if isinstance(results.get("model"), dict) and "identity" in results["model"]:
        found.setdefault("model", results.pop("model"))
    info = results.get("info")
    if isinstance(info, dict):
        info = dict(info)
        for key in ("inputs", "model", "command"):
            if key in info:
                found.setdefault(key, info.pop(key))
        if "seed" in info:
            found.setdefault("seed", info["seed"])
        results["info"] = info
    if "seed" in results:
        found.setdefault("seed", results["seed"])
    return results, found


def envelope(name: str, results, *, inputs=None, model=None, seed=None, command: list[str] | None = None) -> dict:
    """The JSON output of kind ``name`` (``docaudit/schemas/<name>.schema.json``): the envelope, then the keys of
    ``results`` (a mapping; a list goes under ``rows``). ``inputs``, ``model`` and ``seed`` default to what
    ``results`` carries (see the module docstring); ``command`` to :func:`outputs.command_line`. An output that
    already has its envelope (one read back from a file) is returned as it is."""
    if isinstance(results, dict) and isinstance(results.get("schema"), dict) and "environment" in results:
        return results
    body, found = _lift(results)
    body = {k: v for k, v in body.items() if k not in ENVELOPE_KEYS}
    return {
        "schema": {"name": name, "version": SCHEMA_VERSION},
        "docaudit_version": __version__,
        "command": command_line(command or found.get("command")),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs": inputs if inputs is not None else found.get("inputs"),
        "model": model if model is not None else found.get("model"),
        "environment": environment(),
        "seed": seed if seed is not None else found.get("seed"),
        **body,
    }


def command_schema(command_path: str) -> str:
    """The output kind of a command's printed JSON, from its path (``docaudit data check`` → ``data-check``)."""
    name = "-".join(command_path.split()[1:])
    return COMMAND_SCHEMAS.get(name, name)
