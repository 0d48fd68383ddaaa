"""The options, declared once: each built from its dataclass field in docaudit/config.py (name, default, type, help
and help section in one place), grouped in the sets the commands share, and the configurations built back from them."""

from __future__ import annotations

import dataclasses
import functools
import typing

import click

from docaudit.cli.command import is_quiet, option
from docaudit.cli.echo import print_ray_summaries
from docaudit.config import (
    MAX_SEED,
    SEED,
    SEED_HELP,
    DetectorConfig,
    MetaConfig,
    ModelConfig,
    QueryConfig,
    RayConfig,
    TrainConfig,
)
from docaudit.inference.verdicts import DEFAULT_ALPHA
from docaudit.methods.detectors import default_methods, methods_help
from docaudit.query.backends.base import BACKENDS

FORMATS = ("table", "json", "csv")


def apply(*decorators):
    """One decorator applying ``decorators`` in order, the first outermost (as when written above a function)."""
    return lambda func: functools.reduce(lambda f, d: d(f), reversed(decorators), func)


@functools.cache
def fields_of(cls) -> dict:
    """The dataclass fields of ``cls`` by name."""
    return {f.name: f for f in dataclasses.fields(cls)}


@functools.cache
def _hints(cls) -> dict:
    """The resolved type annotations of the dataclass ``cls``."""
    return typing.get_type_hints(cls)


def _param_name(field: dataclasses.Field) -> str:
    """The parameter name click gives the field's option: its flag without dashes."""
    return field.metadata.get("flag", f"--{field.name}").lstrip("-").replace("-", "_")


def field_option(cls, name: str, *decls: str, **overrides):
    """The option of the dataclass field ``cls.name`` (declared with ``config.setting``): its flag (``--`` and the
    field's name unless the field names another), default, type (a flag for a bool, a choice among the field's
    ``choices``, comma-separated text for a tuple), help and section. ``decls`` and ``overrides`` replace them
    where one command's option differs."""
    field = fields_of(cls)[name]
    meta, default = field.metadata, field.default
    hint = _hints(cls)[name]
    kind = next((t for t in typing.get_args(hint) if t is not type(None)), hint)  # X of "X | None"
    settings = {"help": meta["help"], "section": meta["section"]}
    if kind is bool:
        settings["is_flag"] = True
        if default:
            settings.update(default=True, show_default=True)
    else:
        several = isinstance(default, tuple)
        settings["default"] = ",".join(default) if several else default
        settings["type"] = click.Choice(meta["choices"]) if "choices" in meta else str if several else kind
        if default is not None:
            settings["show_default"] = True
    main = option(*(decls or (meta.get("flag", f"--{name.replace('_', '-')}"),)), **settings | overrides)
    if not meta.get("aliases") or decls:  # a command naming the option its own way keeps only that name
        return main
    new, dest = meta.get("flag", f"--{name.replace('_', '-')}"), _param_name(field)
    return apply(main, *(former_option(old, dest, new, **settings | overrides) for old in meta["aliases"]))


def former_option(old: str, dest: str, new: str, **settings):
    """The former spelling ``old`` of the option ``new``: hidden from the help, read into the same parameter
    ``dest`` (click keeps the value given on the command line or in a config file over a default), kept for one
    release (CHANGELOG.md, "Renamed options")."""
    settings = {k: v for k, v in settings.items() if k not in ("help", "section", "show_default", "required")}
    return option(old, dest, hidden=True, help=f"Former name of {new}.", section=None, **settings)


def field_options(cls, *names: str):
    """The options of several fields of ``cls``, in the order given."""
    return apply(*(field_option(cls, n) for n in names))


def config_from(cls, kw: dict, skip: tuple[str, ...] = (), **values):
    """``cls`` from parsed options: each field that has an option (``config.setting``) and was parsed, except those
    in ``skip``, then ``values``."""
    parsed = {
        f.name: kw[_param_name(f)]
        for f in fields_of(cls).values()
        if "section" in f.metadata and _param_name(f) in kw and f.name not in skip
    }
    return cls(**parsed | values)


class FormatChoice(click.Choice):
    """``table|json|csv`` (``text``, the former name of ``table``, is still read as ``table``)."""

    def convert(self, value, param, ctx):
        return super().convert("table" if value == "text" else value, param, ctx)


format_option = option(
    "--format",
    "fmt",
    type=FormatChoice(FORMATS),
    default="table",
    show_default=True,
    help="table for people; json or csv for programs.",
    section="output",
)


def overwrite_option(help: str = "Replace an earlier docaudit output of the same kind at --out."):
    return option("--overwrite", is_flag=True, help=help, section="output")


def out_option(help: str, required: bool = False):
    """``--out``: the folder a command writes."""
    if required:
        return option("--out", type=click.Path(), required=True, help=help, section="output")
    return option("--out", type=click.Path(), default=None, help=help, section="output")


def null_library_option(help: str):
    """``--null-library``: never-seen texts (files or folders, repeatable), treated like the books: the null."""
    return option("--null-library", "library", multiple=True, type=click.Path(), help=help, section="inputs")


drop_duplicates_option = field_option(TrainConfig, "drop_duplicates")
normalize_chars_option = field_option(TrainConfig, "normalize_chars")
cleaning_options = field_options(TrainConfig, "raw", "normalize_chars")
strict_option = option(
    "--strict",
    is_flag=True,
    help="Stop at the first document that cannot be used (unreadable, "
    "empty after cleaning, too short) instead of skipping it with a warning.",
    section="inputs",
)


def alpha_option(help: str):
    """``--alpha``: the level of the verdicts."""
    return option("--alpha", type=float, default=DEFAULT_ALPHA, show_default=True, help=help, section="method")


def seed_option(seeds: str = "run"):
    """``--seed``: the run's one seed (``RunContext.seed``), its default ``config.SEED``, its help what it seeds in
    the command (``config.SEED_HELP[seeds]``)."""
    help, section = SEED_HELP[seeds]
    seeds_allowed = click.IntRange(0, MAX_SEED)
    return option("--seed", type=seeds_allowed, default=SEED, show_default=True, help=help, section=section)


MODEL_FIELDS = (
    *("model", "dtype", "device", "quantize", "revision", "trust_remote_code", "backend", "kv_cache"),
    "llama_repack",
    *("api_base", "api_model", "api_key_env", "api_tokenizer", "api_logprobs", "max_requests", "api_timeout"),
    *("api_retries", "api_document_timeout"),
)
model_options = apply(
    *(
        field_option(ModelConfig, n, type=click.Choice(BACKENDS)) if n == "backend" else field_option(ModelConfig, n)
        for n in MODEL_FIELDS
    )
)
query_options = field_options(QueryConfig, "context", "stride", "max_tokens", "excerpt", "batch_size")
ray_options = apply(
    option(
        "--ray",
        "ray_local",
        is_flag=True,
        help="Query on workers of a local Ray instance started for this run (pip install 'docaudit[ray]').",
        section="query",
    ),
    field_options(RayConfig, "workers", "address"),
)
meta_options = field_options(MetaConfig, "norm", "features", "bins")
trees_option = field_option(MetaConfig, "n_estimators")
folds_option = field_option(MetaConfig, "folds")
detector_options = apply(
    field_options(DetectorConfig, "k", "pac_copies"),
    option(
        "--ref-model", default=None, help="Reference model for method 'ref' (same forms as --model).", section="model"
    ),
    option(
        "--neighbor-model",
        default=None,
        help="Masked LM (HF directory or hub id) for method 'neighbor'.",
        section="model",
    ),
)
freq_corpus_option = option(
    "--freq-corpus",
    multiple=True,
    type=click.Path(),
    help="DC-PDD: documents whose token frequencies calibrate it (default: the documents given, without labels).",
    section="method",
)
METHOD_HELP = (
    f"Comma-separated detectors (default: {','.join(default_methods())}, plus ref / neighbor when their "
    f"model is given). {methods_help()}. In evaluate, `blind` alone runs only the model-free baseline, "
    "without loading a model."
)
methods_option = option("--methods", default=None, help=METHOD_HELP, section="method")


def model_config(kw) -> ModelConfig:
    return config_from(ModelConfig, kw)


def query_config(kw) -> QueryConfig:
    return config_from(QueryConfig, kw)


def detector_config(kw) -> DetectorConfig:
    return config_from(DetectorConfig, kw)


def ref_config(kw) -> ModelConfig | None:
    """The reference model of method ``ref``: ``--ref-model`` queried with the target's dtype and device."""
    if kw["ref_model"] is None:
        return None
    return ModelConfig(
        model=kw["ref_model"],
        dtype=kw["dtype"],
        device=kw["device"],
        revision=None,
        trust_remote_code=kw["trust_remote_code"],
    )


def given_settings(kw, names) -> dict:
    """The options among ``names`` that the user gave (on the command line or in a --config file), with their
    values: what replaces a classifier card's settings."""
    ctx = click.get_current_context()
    given = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.DEFAULT_MAP)
    return {n: kw[n] for n in names if ctx.get_parameter_source(n) in given and kw[n] is not None}


def ray_config(kw) -> RayConfig | None:
    """The Ray settings of ``--ray``, ``--ray-workers`` and ``--ray-address``, or None without them."""
    if not (kw["ray_local"] or kw["ray_workers"] is not None or kw["ray_address"]):
        return None
    if not is_quiet():
        print_ray_summaries()
    return config_from(RayConfig, kw)
