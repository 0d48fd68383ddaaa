"""The ``docaudit`` command line: a thin click layer over ``docaudit.api``."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sys
from pathlib import Path

import click

from docaudit.config import (
    API_LOGPROBS,
    DTYPES,
    EXCERPTS,
    FEATURES,
    NORMS,
    QUANTIZE,
    TEXT_COLUMNS,
    ContaminationConfig,
    DatasetConfig,
    DatasetTestConfig,
    DetectorConfig,
    MetaConfig,
    ModelConfig,
    QueryConfig,
    RayConfig,
    ScalingConfig,
    SequenceConfig,
    TargetConfig,
    TrainConfig,
    TrapConfig,
)
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DEBUG_KEY, DocauditError, remember_debug, report_error
from docaudit.methods.detectors import METHODS, default_methods, methods_help
from docaudit.query.backends.base import BACKENDS
from docaudit.verdicts import DEFAULT_ALPHA


def _quiet_libraries() -> None:
    """Library warnings and progress bars off, without importing the libraries (so bad input is answered at once)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    # int8 matmuls cast their inputs to float16 by design; bitsandbytes says so on every call
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def friendly_errors(func):
    """Turn DocauditError into a one-line message and a non-zero exit; interruption keeps the cache."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as e:  # every failure: docaudit.errors gives its line and exit status
            _close_progress_bars()
            sys.exit(report_error(e, click.get_current_context().meta.get(DEBUG_KEY, False)))
        except KeyboardInterrupt:
            _close_progress_bars()
            click.echo("interrupted: finished documents are cached; run the same command again to resume", err=True)
            sys.exit(130)

    return wrapper


def _close_progress_bars() -> None:
    """End unfinished progress bars so the error message starts on its own line."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", [])):
        bar.close()


FORMATS = ("table", "json", "csv")


class FormatChoice(click.Choice):
    """``table|json|csv`` (``text``, the former name of ``table``, is still read as ``table``)."""

    def convert(self, value, param, ctx):
        return super().convert("table" if value == "text" else value, param, ctx)


def format_option(func):
    """``--format table|json|csv`` (default ``table``): the same values in every command; JSON carries
    ``docaudit_version``."""
    return click.option(
        "--format",
        "fmt",
        type=FormatChoice(FORMATS),
        default="table",
        show_default=True,
        help="table for people; json or csv for programs.",
    )(func)


def show_progress() -> bool:
    """Progress bars only on a terminal and without ``--quiet``."""
    ctx = click.get_current_context(silent=True)
    quiet = ctx is not None and ctx.meta.get(QUIET_KEY, False)
    return not quiet and sys.stderr.isatty()


QUIET_KEY = "docaudit.quiet"


def _set_quiet(ctx, _param, value) -> None:
    """Record ``--quiet`` where every command's context sees it (``ctx.meta`` is shared)."""
    ctx.meta[QUIET_KEY] = ctx.meta.get(QUIET_KEY, False) or value


QUIET_OPTION = click.Option(
    ["--quiet", "-q"],
    is_flag=True,
    expose_value=False,
    help="No progress bars (also off when stderr is not a terminal).",
    callback=_set_quiet,
)
CONFIG_OPTION = click.Option(
    ["--config", "config_file"],
    type=click.Path(dir_okay=False),
    expose_value=False,
    is_eager=True,
    help="TOML or YAML file of option values: the section named after the command (e.g. [report], [data.check]) "
    "maps option names to values; options given on the command line win.",
)


class ConfigError(click.ClickException):
    """A bad ``--config`` file or command line, printed on one line like every user error."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.message}", err=True)


class ConfigCommand(click.Command):
    """A command with ``--config FILE`` and ``--quiet``: the file's section for this command becomes click's
    ``default_map`` (keys: option names, with dashes or underscores; arguments by their name), so every option,
    including those added later, can come from a file."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        taken = {p.name for p in self.params}
        self.params += [o for o in (CONFIG_OPTION, QUIET_OPTION) if o.name not in taken]

    def make_context(self, info_name, args, parent=None, **extra):
        from docaudit import outputs

        outputs.COMMAND_LINE = ["docaudit", *_section_path(parent, info_name), *args]
        path = _config_path(args)
        if path is not None and CONFIG_OPTION in self.params and "default_map" not in extra:
            extra["default_map"] = config_defaults(self, _section_path(parent, info_name), path)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:  # a missing or unknown option: one line, like every user error
            raise ConfigError(
                f"{e.format_message()} (see {' '.join(['docaudit', *_section_path(parent, info_name)])} --help)"
            ) from None


class DocauditGroup(click.Group):
    """Commands of this group (and of its subgroups) read ``--config`` and ``--quiet``."""

    command_class = ConfigCommand
    group_class = type


def _config_path(args) -> str | None:
    """The value of ``--config`` among a command's raw arguments (None when absent)."""
    args = [str(a) for a in args]
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def _section_path(parent, info_name) -> list[str]:
    """``["data", "check"]`` for ``docaudit data check``: the command's names below the root."""
    names = [info_name]
    while parent is not None and parent.parent is not None:
        names.insert(0, parent.info_name)
        parent = parent.parent
    return names


CONFIG_MAX_BYTES = 1 << 20  # a config file longer than this is refused (it is read whole)


def read_config_file(path) -> dict:
    """A TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file as a mapping, read within bounds: at most
    ``CONFIG_MAX_BYTES``, a UTF-8 byte-order mark ignored, YAML without aliases (``*name``: a few nested ones expand
    to billions of nodes) and with only the safe loader's plain types."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigError(f"--config {path}: use a .toml, .yaml or .yml file")
    try:
        if not path.is_file():
            raise ConfigError(f"--config {path}: cannot read it (no such file)")
        with path.open("rb") as f:
            raw = f.read(CONFIG_MAX_BYTES + 1)
        if len(raw) > CONFIG_MAX_BYTES:
            raise ConfigError(f"--config {path}: larger than {CONFIG_MAX_BYTES} bytes; a config file is a few lines")
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path}: cannot read it ({e})") from None
    try:
        if suffix == ".toml":
            from docaudit.io import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.load(text, Loader=_yaml_loader()) or {}
    except Exception as e:  # the parsers' own errors, on one line
        problem = (str(e).splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"--config {path}: not valid {suffix[1:].upper()} ({problem})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of sections or options")
    return data


@functools.cache
def _yaml_loader():
    """PyYAML's safe loader refusing aliases."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"aliases (*name) are not accepted in a config file (line {mark.line + 1})", mark
                )
            return super().compose_node(parent, index)

    return NoAliasLoader


GRANTS = ("trust_remote_code", "use_card_backend")  # confirmations a config file cannot give (only the command line)


def _config_value(path, where: str, key, param: click.Parameter, value):
    """A config file's value for ``param``, checked as the command line would check it: one value (a list only
    for an option taking several), each a string, number or boolean, a number finite, converted by the option's
    type; anything else is a one-line error. The value itself is returned (click converts it again)."""
    several = getattr(param, "multiple", False) or param.nargs == -1
    values = value if several and isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"--config {path}: [{where}] {key} = {item}: not a finite number")
        if not isinstance(item, (str, int, float, bool)):
            kind = "a list" if isinstance(item, list) else type(item).__name__
            raise ConfigError(f"--config {path}: [{where}] {key}: expected a single value, not {kind}")
        try:
            param.type.convert(item, param, None)
        except click.BadParameter as e:
            raise ConfigError(f"--config {path}: [{where}] {key}: {e.format_message()}") from None
        except Exception as e:  # conversions outside click's own checks (e.g. an integer too large)
            raise ConfigError(f"--config {path}: [{where}] {key} = {item!r}: {type(e).__name__}: {e}") from None
    return value


def _option_key(param: click.Parameter) -> str:
    """The name a config file uses for a parameter: its long option without dashes, or its argument name."""
    return next((o.lstrip("-") for o in param.opts if o.startswith("--")), param.name.replace("_", "-"))


def config_defaults(command: click.Command, section: list[str], path) -> dict:
    """The ``default_map`` of ``command`` from the file's section ``section`` (a flat file without sections is
    the section itself); an unknown option is an error naming the known ones."""
    data, where = read_config_file(path), ".".join(section)
    values = data
    for name in section:
        values = values.get(name) if isinstance(values, dict) else None
    if values is None:
        if any(isinstance(v, dict) for v in data.values()):
            raise ConfigError(f"--config {path}: no [{where}] section (found: {', '.join(map(str, data))})")
        values = data
    if not isinstance(values, dict):
        raise ConfigError(f"--config {path}: [{where}] must map option names to values")
    params = {}
    for p in command.params:
        if p.name and (p.expose_value or p is QUIET_OPTION):
            for name in (p.name, *(o.lstrip("-") for o in p.opts)):
                params[name.replace("_", "-")] = (p, False)
            for o in getattr(p, "secondary_opts", ()):
                params[o.lstrip("-")] = (p, True)
    defaults = {}
    for key, value in values.items():
        if str(key).replace("_", "-") not in params:
            known = ", ".join(sorted({_option_key(p) for p, _ in params.values()}))
            raise ConfigError(f"--config {path}: [{where}] has no option '{key}' (options: {known})")
        param, negated = params[str(key).replace("_", "-")]
        value = _config_value(path, where, key, param, value)
        if param.name in GRANTS and param.type.convert(value, param, None) is not negated:
            raise ConfigError(
                f"--config {path}: [{where}] {key}: a config file cannot turn this on; give "
                f"--{param.name.replace('_', '-')} on the command line"
            )
        if negated:
            value = not value
        if (getattr(param, "multiple", False) or param.nargs == -1) and not isinstance(value, list):
            value = [value]
        defaults[param.name] = value
    return defaults


def model_options(func):
    options = [
        click.option(
            "--model", default=None, help="Hub id, local HF directory or .gguf file (default: embedded Gemma-3-270M)."
        ),
        click.option("--dtype", type=click.Choice(DTYPES), default=ModelConfig.dtype, show_default=True),
        click.option(
            "--device",
            default=ModelConfig.device,
            show_default=True,
            help="cpu, cuda, cuda:1 … (auto: CUDA when present).",
        ),
        click.option(
            "--quantize", type=click.Choice(QUANTIZE), default=None, help="Load the model in int8/int4 (bitsandbytes)."
        ),
        click.option("--revision", default=None, help="Hub revision (branch, tag or commit)."),
        click.option("--trust-remote-code", is_flag=True, help="Allow model code from the hub (off by default)."),
        click.option(
            "--backend",
            type=click.Choice(BACKENDS),
            default=ModelConfig.backend,
            show_default=True,
            help="What runs the model: transformers (this process), llamacpp (a .gguf through llama.cpp, not "
            "dequantized) or openai (an OpenAI-compatible server: --api-base, or --model http://HOST:PORT/v1#NAME).",
        ),
        click.option(
            "--kv-cache",
            type=click.Choice(["f32", "f16"]),
            default=ModelConfig.kv_cache,
            show_default=True,
            help="llamacpp: precision of the K/V cache (f16 is faster, its log-probabilities differ by ~2e-3).",
        ),
        click.option("--api-base", default=None, help="openai: the server's base URL, e.g. http://127.0.0.1:8000/v1."),
        click.option("--api-model", default=None, help="openai: the model name the server serves."),
        click.option(
            "--api-key-env", default=None, help="openai: the environment variable holding the API key (never logged)."
        ),
        click.option(
            "--api-tokenizer",
            default=None,
            help="openai: the server model's tokenizer (HF directory, hub id or .gguf; default: --model).",
        ),
        click.option(
            "--api-logprobs",
            type=click.Choice(API_LOGPROBS),
            default=ModelConfig.api_logprobs,
            show_default=True,
            help="openai: prompt log-probabilities (echo), or top-n with a logit-bias search; auto asks the server.",
        ),
        click.option(
            "--max-requests", type=int, default=None, help="openai: stop before a run that would need more requests."
        ),
        click.option(
            "--api-timeout",
            type=float,
            default=ModelConfig.api_timeout,
            show_default=True,
            help="openai: seconds one request may take as a whole (connection to last byte).",
        ),
        click.option(
            "--api-retries",
            type=int,
            default=ModelConfig.api_retries,
            show_default=True,
            help="openai: retries of a request after a timeout, a failed connection or a busy server.",
        ),
        click.option(
            "--api-document-timeout",
            type=float,
            default=None,
            help="openai: seconds all requests of one document may take together (default: no bound beyond "
            "--api-timeout and --api-retries).",
        ),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(options), func)


def query_options(func):
    options = [
        click.option(
            "--context", default=QueryConfig.context, show_default=True, help="Context length C of each window."
        ),
        click.option(
            "--stride", default=None, type=int, help="Stride S (default C-1; smaller values overlap windows)."
        ),
        click.option(
            "--max-tokens", default=None, type=int, help="Query only an excerpt of this many tokens per document."
        ),
        click.option("--excerpt", type=click.Choice(EXCERPTS), default=QueryConfig.excerpt, show_default=True),
        click.option("--batch-size", default=None, type=int, help="Windows per forward pass (default: automatic)."),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(options), func)


def ray_options(func):
    """``--ray``, ``--ray-workers``, ``--ray-address``: query on Ray workers (docs/scaling.md)."""
    options = [
        click.option(
            "--ray",
            "ray_local",
            is_flag=True,
            help="Query on workers of a local Ray instance started for this run (pip install 'docaudit[ray]').",
        ),
        click.option(
            "--ray-workers",
            type=int,
            default=RayConfig.workers,
            help="Ray workers, each holding a copy of the model (implies --ray; default: one per GPU when the "
            "model is queried on GPUs, else one per CPU).",
        ),
        click.option(
            "--ray-address",
            default=RayConfig.address,
            help="Query on a running Ray cluster: auto, HOST:6379 or ray://HOST:10001 (docs/scaling.md).",
        ),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(options), func)


OVERWRITE = click.option(
    "--overwrite", is_flag=True, help="Replace an earlier docaudit output of the same kind at --out."
)


DROP_DUPLICATES = click.option(
    "--drop-duplicates", is_flag=True, help="Leave out documents found in both sets (by default they are an error)."
)


normalize_chars_option = click.option(
    "--normalize-chars",
    is_flag=True,
    default=TrainConfig.normalize_chars,
    help="Also normalize typographic characters (curly quotes, dashes, special spaces), emphasis markup (_x_) and "
    "whitespace. Off by default: the work's text reaches the model as written, only boilerplate is removed.",
)


def cleaning_options(func):
    """``--raw`` and ``--normalize-chars``: how documents are cleaned before they are queried."""
    raw = click.option("--raw", is_flag=True, help="Keep the files as they are (no Gutenberg boilerplate removal).")
    return raw(normalize_chars_option(func))


DOCUMENT_PARAMETERS = (
    "members",
    "nonmembers",
    "documents",
    "books",
    "calibrate_members",
    "calibrate_nonmembers",
    "suspect",
    "set_a",
    "set_b",
)


def _dataset_options(labelled: bool, join_groups: bool = True):
    """The options that read benchmark datasets (JSONL, CSV, Parquet, Hugging Face) given where documents are
    expected: their columns and split; with ``labelled``, also ``--data`` (one labelled dataset giving both
    members and non-members by its label column). Every document argument naming a dataset is handed on as a
    ``DatasetSource`` with these columns."""

    def decorate(func):
        options = [
            click.option(
                "--text-column",
                default=None,
                help=f"Dataset column holding the text (default: the first of {', '.join(TEXT_COLUMNS)}).",
            ),
            click.option(
                "--label-column", default=None, help="Dataset column holding the label, 1 = member (default: label)."
            ),
            click.option(
                "--id-column", default=None, help="Dataset column holding the row id (default: id, else the row index)."
            ),
            click.option(
                "--group-column",
                default=None,
                help="Dataset column grouping rows into documents (e.g. BookMIA's book_id)"
                + (": each group's rows are joined into one document." if join_groups else "; reported per sample."),
            ),
            click.option("--split", default=None, help="Split of a Hugging Face dataset with several."),
        ]
        if labelled:
            options.insert(
                0,
                click.option(
                    "--data",
                    multiple=True,
                    type=click.Path(),
                    help="A labelled dataset (.jsonl, .csv, .parquet, saved HF dataset, hf:NAME[:SPLIT]) giving "
                    "members (label 1) and non-members (label 0); instead of or beside --members / --nonmembers.",
                ),
            )

        @functools.wraps(func)
        @friendly_errors
        def wrapper(*args, text_column, label_column, id_column, group_column, split, **kwargs):
            from docaudit.corpus.datasets import DatasetSource, as_source

            config = DatasetConfig(text_column, label_column, id_column, group_column, split, join_groups)
            for name in DOCUMENT_PARAMETERS:
                if name in kwargs:
                    value = kwargs[name]
                    kwargs[name] = (
                        tuple(as_source(p, config) for p in value)
                        if isinstance(value, tuple)
                        else as_source(value, config)
                    )
            if labelled:
                data = kwargs.pop("data")
                kwargs["members"] += tuple(DatasetSource(d, config, by_label=True) for d in data)
                if not data and not (kwargs["members"] and kwargs["nonmembers"]):
                    raise DocauditError("give --members and --nonmembers, or --data with a label column")
            return func(*args, **kwargs)

        return functools.reduce(lambda f, o: o(f), reversed(options), wrapper)

    return decorate


dataset_options = _dataset_options(labelled=False)
labelled_dataset_options = _dataset_options(labelled=True)
sequence_dataset_options = _dataset_options(labelled=True, join_groups=False)


def strict_option(func):
    return click.option(
        "--strict",
        is_flag=True,
        help="Stop at the first document that cannot be used (unreadable, "
        "empty after cleaning, too short) instead of skipping it with a warning.",
    )(func)


def echo_json(value) -> None:
    """Print strict JSON (NaN and infinities as null) in the envelope of every output (docs/outputs.md)."""
    from docaudit.io import json_text
    from docaudit.provenance import command_schema, envelope

    click.echo(json_text(envelope(command_schema(click.get_current_context().command_path), value)))


def echo_csv(rows) -> None:
    """Print rows (a DataFrame or a list of dicts) as CSV."""
    import pandas as pd

    click.echo((rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)).to_csv(index=False), nl=False)


def warn_skipped(skipped: list[dict]) -> None:
    """One warning line on stderr per kind of skipped document."""
    from docaudit.corpus.documents import skip_warnings

    for line in skip_warnings(skipped):
        click.echo(f"warning: {line}", err=True)


def skipped_note(skipped: list[dict]) -> str:
    return f" ({len(skipped)} skipped)" if skipped else ""


def model_config(kw) -> ModelConfig:
    return ModelConfig(
        model=kw["model"],
        dtype=kw["dtype"],
        device=kw["device"],
        quantize=kw["quantize"],
        revision=kw["revision"],
        trust_remote_code=kw["trust_remote_code"],
        backend=kw["backend"],
        api_base=kw["api_base"],
        api_model=kw["api_model"],
        api_key_env=kw["api_key_env"],
        api_tokenizer=kw["api_tokenizer"],
        api_logprobs=kw["api_logprobs"],
        max_requests=kw["max_requests"],
        api_timeout=kw["api_timeout"],
        api_retries=kw["api_retries"],
        api_document_timeout=kw["api_document_timeout"],
        kv_cache=kw.get("kv_cache", ModelConfig.kv_cache),
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
    ctx = click.get_current_context(silent=True)
    if not (ctx is not None and ctx.meta.get(QUIET_KEY, False)):
        _print_ray_summaries()
    return RayConfig(address=kw["ray_address"], workers=kw["ray_workers"])


class _SummaryFormatter(logging.Formatter):
    """A summary line as it is; a warning after ``warning:``, as the CLI prints its own."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        return message if record.levelno <= logging.INFO else f"{record.levelname.lower()}: {message}"


def _print_ray_summaries() -> None:
    """Print on stderr the line the Ray pool logs after each batch of queries (documents, cache hits, tokens/s,
    lost tasks), as it is logged: a summary of the run, shown unless ``--quiet``."""
    summaries = logging.getLogger("docaudit.query.distributed")
    if not summaries.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_SummaryFormatter())
        summaries.addHandler(handler)
    summaries.setLevel(logging.INFO)
    summaries.propagate = False


def query_config(kw) -> QueryConfig:
    return QueryConfig(
        context=kw["context"],
        stride=kw["stride"],
        max_tokens=kw["max_tokens"],
        excerpt=kw["excerpt"],
        seed=kw["seed"],
        batch_size=kw["batch_size"],
    )


@click.group(cls=DocauditGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="docaudit")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=remember_debug,
    help="Show the traceback of an internal error.",
)
def main():
    """docaudit: was this document in the training data of this language model?"""
    _quiet_libraries()


@main.command()
@click.option(
    "--members", multiple=True, type=click.Path(), help="Member documents (dir, .txt or dataset; repeatable)."
)
@click.option("--nonmembers", multiple=True, type=click.Path(), help="Non-member documents (repeatable).")
@labelled_dataset_options
@model_options
@ray_options
@query_options
@click.option("--norm", type=click.Choice(("auto", *NORMS)), default=MetaConfig.norm, show_default=True)
@click.option("--features", type=click.Choice(("auto", *FEATURES)), default=MetaConfig.features, show_default=True)
@click.option("--bins", default=MetaConfig.bins, show_default=True, help="HistFE bins.")
@click.option("--folds", default=MetaConfig.folds, show_default=True, help="k of the k-fold chunks.")
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@click.option("--trees", default=MetaConfig.n_estimators, show_default=True, help="Random-forest trees.")
@click.option(
    "--min-tokens",
    default=TrainConfig.min_tokens,
    show_default=True,
    help="Skip documents with fewer tokens (paper: 5000).",
)
@cleaning_options
@click.option("--grid", is_flag=True, help="Run the Table-1 grid (norms × features × contexts) and print it.")
@click.option("--grid-contexts", default="32,64,128", show_default=True)
@click.option(
    "--out", type=click.Path(), default=None, help="Save the classifier here, e.g. models/NAME (needed unless --grid)."
)
@OVERWRITE
@DROP_DUPLICATES
@strict_option
@format_option
@friendly_errors
def train(
    members,
    nonmembers,
    norm,
    features,
    bins,
    folds,
    seed,
    trees,
    min_tokens,
    raw,
    normalize_chars,
    grid,
    grid_contexts,
    out,
    overwrite,
    drop_duplicates,
    strict,
    fmt,
    **kw,
):
    """Evaluate the meta-classifier with k-fold chunks, then fit it on all documents and save it."""
    if not grid and out is None:
        raise DocauditError("--out is required (where to save the classifier, e.g. models/NAME)")
    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.classifier import chance_level

    kw["seed"] = seed
    config = TrainConfig(
        model=model_config(kw),
        query=query_config(kw),
        min_tokens=min_tokens,
        raw=raw,
        drop_duplicates=drop_duplicates,
        normalize_chars=normalize_chars,
        meta=MetaConfig(norm=norm, features=features, bins=bins, folds=folds, seed=seed, n_estimators=trees),
    )
    skips = Skips(strict)
    if grid:
        contexts = [int(c) for c in grid_contexts.split(",")]
        table = api.grid(
            members, nonmembers, config, contexts, skips=skips, ray=ray_config(kw), progress=show_progress()
        )
        warn_skipped(skips.as_json())
        if fmt == "json":
            echo_json(table.to_dict(orient="records"))
        elif fmt == "csv":
            echo_csv(table)
        else:
            click.echo(table.to_string(index=False, float_format="%.3f"))
        return
    result = api.train(
        members,
        nonmembers,
        config,
        Path(out),
        overwrite=overwrite,
        skips=skips,
        ray=ray_config(kw),
        progress=show_progress(),
    )
    warn_skipped(result.skipped)
    if fmt == "json":
        echo_json(result.card)
        return
    if fmt == "csv":
        from docaudit.report.classifier import out_of_fold_predictions

        echo_csv(out_of_fold_predictions(result.documents, result.evaluation))
        return
    from docaudit.report.tables import format_beyond_blind, format_query, format_summary

    click.echo(
        f"documents: {result.card['n_members']} members, {result.card['n_nonmembers']} non-members"
        + skipped_note(result.skipped)
        + duplicates_note(result.card["duplicates_dropped"], "; ")
    )
    click.echo(f"model: {result.card['model_identity']}; query: {format_query(result.card['query'])}")
    click.echo(f"{folds}-fold chunks ({', '.join(result.evaluation.configs)}): {format_summary(result.summary)}")
    auc = result.card["pooled_bootstrap_95"]["auc"]
    click.echo(
        f"pooled out-of-fold AUC {auc['point']:.3f} (95% bootstrap interval {auc['ci_low']:.3f}–{auc['ci_high']:.3f})"
    )
    if chance_level(result.card):
        click.echo("the interval includes 0.5: this classifier does not detect membership better than chance here")
    blind = result.card["blind"]
    click.echo(f"blind baseline (no model, same folds): AUC {blind['blind_auc']:.3f} ({blind['best_kind']})")
    click.echo(format_beyond_blind(result.card["beyond_blind"]))
    if result.card["warning"]:
        click.echo(result.card["warning"], err=True)
    click.echo(f"saved {result.final_config} classifier to {out}")


@main.command()
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@dataset_options
@click.option(
    "--classifier", type=click.Path(), default=None, help="Saved classifier directory (default: the shipped one)."
)
@click.option(
    "--alpha",
    type=float,
    default=DEFAULT_ALPHA,
    show_default=True,
    help="Level of the verdict: evidence of membership when the Benjamini-Hochberg q-value is below it.",
)
@model_options
@click.option(
    "--use-card-backend",
    is_flag=True,
    help="Query the server or hub model the classifier's card names, with its settings (the API key only from "
    "--api-key-env; --api-timeout, --api-retries given here win).",
)
@ray_options
@strict_option
@format_option
@friendly_errors
def predict(documents, classifier, alpha, strict, fmt, use_card_backend, **kw):
    """Verdict for each document: evidence of membership, no evidence, or inconclusive with the reason, from its
    p-value against the classifier's known non-members (a document that cannot be used is a row saying why)."""
    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.verdicts import format_predictions

    model = model_config(kw) if kw["model"] or kw["backend"] != ModelConfig.backend else None
    skips = Skips(strict)
    rows = api.predict(
        documents,
        Path(classifier) if classifier else None,
        model,
        skips=skips,
        trust_remote_code=kw["trust_remote_code"],
        use_card_backend=use_card_backend,
        user_settings=given_settings(kw, ("api_key_env", "api_timeout", "api_retries", "api_document_timeout")),
        alpha=alpha,
        ray=ray_config(kw),
        progress=show_progress(),
    )
    warn_skipped(skips.as_json())
    rows += [{"file": s["file"], "skipped": s["reason"]} for s in skips.as_json()]
    if fmt == "json":
        echo_json(rows)
        return
    if fmt == "csv":
        echo_csv(rows)
        return
    click.echo(format_predictions(rows))


@main.command()
@click.option("--corpus", required=True, type=click.Path(), help="Pool of documents (directory of .txt).")
@click.option("--out", required=True, type=click.Path(), help="Lab directory (resumable).")
@click.option("--overwrite", is_flag=True, help="Discard an earlier lab at --out and start again (default: resume it).")
@click.option("--arch", type=click.Choice(["gpt2", "llama"]), default=TargetConfig.arch, show_default=True)
@click.option("--layers", default=TargetConfig.layers, show_default=True)
@click.option("--width", default=TargetConfig.width, show_default=True)
@click.option("--heads", default=TargetConfig.heads, show_default=True)
@click.option(
    "--positions",
    default=TargetConfig.positions,
    show_default=True,
    help="Target's positions and training block length.",
)
@click.option("--vocab-size", default=TargetConfig.vocab_size, show_default=True)
@click.option("--epochs", default=TargetConfig.epochs, show_default=True)
@click.option("--learning-rate", default=TargetConfig.learning_rate, show_default=True)
@click.option(
    "--train-batch-size", "batch_size", default=TargetConfig.batch_size, show_default=True, help="Training batch."
)
@click.option(
    "--doc-tokens",
    default=TargetConfig.doc_tokens,
    show_default=True,
    help="Leading tokens per document used (train and test).",
)
@click.option("--docs", default=None, type=int, help="Use a seeded random subset of this many documents.")
@click.option(
    "--base-model", default=None, help="Continue pretraining this local model instead of training from scratch."
)
@click.option("--methods", default=None, help="Detectors to evaluate (comma list; default: all single-pass ones).")
@click.option("--folds", default=MetaConfig.folds, show_default=True)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@click.option(
    "--extra-quantize", "quantize_list", default="", help="Also evaluate at these quantizations, e.g. int8,int4."
)
@click.option("--extra-dtypes", "dtype_list", default="", help="Also evaluate at these dtypes, e.g. bfloat16,float16.")
@click.option(
    "--trap-copies",
    default=None,
    type=int,
    help="Train on members with copyright traps planted this many times each, and test every document for them.",
)
@click.option("--trap-tokens", default=TrapConfig.tokens, show_default=True, help="With --trap-copies: trap length.")
@click.option("--traps-per-doc", default=TrapConfig.per_document, show_default=True, help="With --trap-copies.")
@click.option("--generator", default=None, help="With --trap-copies: the trap generator (default embedded Gemma).")
@normalize_chars_option
@ray_options
@format_option
@friendly_errors
def lab(
    corpus, out, overwrite, docs, base_model, methods, folds, quantize_list, dtype_list, normalize_chars, fmt, **target
):
    """Randomized controlled experiment: train a target on a random half of a pool, then evaluate on true labels."""
    from docaudit import api
    from docaudit.config import TargetConfig
    from docaudit.report.tables import format_methods_table

    precisions = [p for p in f"{dtype_list},{quantize_list}".split(",") if p]
    ray = ray_config({k: target.pop(k) for k in ("ray_local", "ray_workers", "ray_address")})
    trap = {k: target.pop(k) for k in ("trap_copies", "trap_tokens", "traps_per_doc", "generator")}
    traps = (
        None
        if trap["trap_copies"] is None
        else TrapConfig(
            tokens=trap["trap_tokens"],
            per_document=trap["traps_per_doc"],
            copies=trap["trap_copies"],
            seed=target["seed"],
        )
    )
    result = api.lab(
        corpus,
        Path(out),
        overwrite,
        base_model,
        target=TargetConfig(**target),
        methods=methods.split(",") if methods else None,
        folds=folds,
        precisions=precisions,
        max_docs=docs,
        normalize_chars=normalize_chars,
        traps=traps,
        generator=ModelConfig(model=trap["generator"]),
        ray=ray,
        progress=show_progress(),
    )
    summary = result.summary()
    if traps is not None:
        _echo_trap_lab(result, fmt)
        return
    if fmt == "json":
        echo_json(summary)
        return
    if fmt == "csv":
        echo_csv(result.evaluation.table.drop(columns=["configs"], errors="ignore"))
        return
    import pandas as pd

    loss = result.loss
    click.echo(
        f"{result.n_members} members, {result.n_nonmembers} non-members, {result.n_tokens:,} tokens; "
        f"target {result.model_dir}"
    )
    click.echo(
        f"loss: members {loss['member_loss']:.3f}, non-members {loss['nonmember_loss']:.3f} "
        f"(gap {loss['gap']:.3f} nats/token)"
    )
    click.echo(f"blind baseline AUC {summary['blind_auc']:.3f} (expected near 0.5: membership was assigned at random)")
    click.echo(format_methods_table(result.evaluation.table))
    if result.precisions:
        table = pd.DataFrame(result.precisions).pivot_table(
            index=["method", "level"], columns="precision", values="auc_mean", sort=False
        )
        click.echo("\nAUC per query precision:\n" + table.to_string(float_format="%.3f"))


def _echo_trap_lab(result, fmt) -> None:
    """What ``lab --trap-copies`` prints: the detection table with a ``trained`` column, and the rates."""
    from docaudit.report.traps import detection_table, format_detection

    if fmt == "json":
        echo_json(result.summary())
    elif fmt == "csv":
        echo_csv(detection_table(result.detection))
    else:
        click.echo(format_detection(result.detection))
        rates = result.rates()
        click.echo(
            f"p < {result.config.alpha}: {rates['members']['p_below_alpha']:.0%} of the {rates['members']['documents']}"
            f" trained documents, {rates['nonmembers']['p_below_alpha']:.0%} of the "
            f"{rates['nonmembers']['documents']} never-trained ones (their share is the test's level)"
        )


@main.command("dataset-test")
@click.option(
    "--suspect", multiple=True, required=True, type=click.Path(), help="Documents suspected to be trained on."
)
@click.option("--nonmembers", multiple=True, required=True, type=click.Path(), help="Known non-members.")
@dataset_options
@model_options
@ray_options
@query_options
@click.option(
    "--methods", default=",".join(DatasetTestConfig.methods), show_default=True, help="Detector scores to combine."
)
@click.option(
    "--splits",
    default=DatasetTestConfig.splits,
    show_default=True,
    help="Random half splits whose p-values are combined.",
)
@click.option(
    "--blind-kind",
    type=click.Choice(["tfidf", "nb", "dates"]),
    default=DatasetTestConfig.blind_kind,
    show_default=True,
    help="Model-free classifier of the texts whose p-value is reported beside the model's.",
)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@cleaning_options
@DROP_DUPLICATES
@strict_option
@format_option
@friendly_errors
def dataset_test(
    suspect, nonmembers, methods, splits, blind_kind, raw, normalize_chars, drop_duplicates, strict, fmt, **kw
):
    """Were the suspect documents, as a set, trained on? A dataset-level test in the style of Maini et al. 2024."""
    from dataclasses import asdict

    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.tables import format_dataset_checks, format_query

    query, skips = query_config(kw), Skips(strict)
    result, scores = api.dataset_test(
        suspect,
        nonmembers,
        model_config(kw),
        methods.split(","),
        query,
        kw["seed"],
        splits,
        raw,
        skips=skips,
        drop_duplicates=drop_duplicates,
        normalize_chars=normalize_chars,
        blind_kind=blind_kind,
        ray=ray_config(kw),
        progress=show_progress(),
    )
    warn_skipped(skips.as_json())
    if fmt == "json":
        echo_json({**asdict(result), "query": query.used(), "skipped": skips.as_json(), "scores": scores})
        return
    if fmt == "csv":
        echo_csv(scores)
        return
    click.echo(
        f"{result.n_suspect} suspect vs {result.n_nonmember} known non-member documents"
        f"{skipped_note(skips.as_json())}, {result.n_features} scores combined; query: {format_query(query.used())}"
        + duplicates_note(result.duplicates_dropped, "; ")
    )
    click.echo(f"p-value {result.p_value:.3g} (t = {result.statistic:.2f}, effect size d = {result.effect_size:.2f})")
    click.echo(result.meaning)
    click.echo(format_dataset_checks(result))


@main.group()
def data():
    """Inspect document sets before querying a model."""


@data.command("check")
@click.argument("set_a", type=click.Path())
@click.argument("set_b", type=click.Path())
@dataset_options
@cleaning_options
@click.option("--folds", default=MetaConfig.folds, show_default=True)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@DROP_DUPLICATES
@strict_option
@format_option
@friendly_errors
def data_check(set_a, set_b, raw, normalize_chars, folds, seed, drop_duplicates, strict, fmt):
    """Compare two document sets (counts, lengths, years, leftover boilerplate) and run the blind baseline."""
    from docaudit import api
    from docaudit.audit.datacheck import format_check
    from docaudit.corpus.documents import Skips

    result = api.data_check(
        set_a, set_b, raw, normalize_chars, folds, seed, drop_duplicates, Skips(strict), progress=show_progress()
    )
    warn_skipped(result["skipped"])
    if result["warning"]:
        click.echo(result["warning"], err=True)
    if fmt == "json":
        echo_json(result)
    elif fmt == "csv":
        echo_csv(
            [
                {"set": name} | {k: v for k, v in result[key].items() if not isinstance(v, (dict, list))}
                for key, name in (("a", set_a), ("b", set_b))
            ]
        )
    else:
        click.echo(format_check(result))


@main.group()
def traps():
    """Copyright traps: plant detectable sequences in documents before publishing them, test a model later."""


@traps.command("make")
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="New folder for the trapped copies (to publish).")
@click.option(
    "--registry", required=True, type=click.Path(), help="File for the PRIVATE registry (never inside --out)."
)
@click.option(
    "--generator", default=None, help="Model generating the traps (forms of --model; default embedded Gemma)."
)
@click.option("--device", default=ModelConfig.device, show_default=True, help="cpu, cuda … (auto: CUDA when present).")
@click.option("--tokens", default=TrapConfig.tokens, show_default=True, help="Trap length in generator tokens.")
@click.option("--traps-per-doc", default=TrapConfig.per_document, show_default=True, help="Traps (and controls) each.")
@click.option("--copies", default=TrapConfig.copies, show_default=True, help="Copies of each trap in its document.")
@click.option("--min-perplexity", default=TrapConfig.min_perplexity, show_default=True)
@click.option("--max-perplexity", default=TrapConfig.max_perplexity, show_default=True)
@click.option("--jaccard", default=TrapConfig.jaccard, show_default=True, help="Near-duplicate threshold.")
@click.option("--seed", default=TrapConfig.seed, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an earlier trap output at --out and its registry.")
@format_option
@friendly_errors
def traps_make(documents, out, registry, generator, device, overwrite, fmt, **kw):
    """Generate traps and controls, plant the traps at random paragraph boundaries of copies of DOCUMENTS."""
    from docaudit import api
    from docaudit.config import TrapConfig

    config = TrapConfig(
        tokens=kw["tokens"],
        per_document=kw["traps_per_doc"],
        copies=kw["copies"],
        min_perplexity=kw["min_perplexity"],
        max_perplexity=kw["max_perplexity"],
        jaccard=kw["jaccard"],
        seed=kw["seed"],
    )
    plan = api.traps_make(
        list(documents),
        Path(out),
        Path(registry),
        ModelConfig(model=generator, device=device),
        config,
        overwrite,
        show_progress(),
    )
    rows = [
        {
            "document": d.id,
            "output": str(Path(out) / d.output),
            "output_sha256": d.output_sha256,
            "traps": len(d.traps),
            "copies": len(d.traps[0].positions),
            "controls": len(d.controls),
        }
        for d in plan.registry.documents
    ]
    if fmt == "json":
        echo_json(
            {"registry": str(registry), "documents": rows, "candidates": plan.candidates, "rejected": plan.rejected}
        )
    elif fmt == "csv":
        echo_csv(rows)
    else:
        click.echo(
            f"planted {config.per_document} traps x {config.copies} copies of {config.tokens} tokens in each of "
            f"{len(rows)} documents, written to {out} (originals untouched); {plan.candidates} candidates generated, "
            f"rejected: {plan.rejected or 'none'}"
        )
        click.echo(f"registry: {registry} -- PRIVATE, do not publish it (it names the traps and the controls)")


@traps.command("detect")
@click.option("--registry", required=True, type=click.Path(), help="The private registry of traps make.")
@model_options
@click.option("--reference-model", default=None, help="Reference model for the ratio score (forms of --model).")
@click.option("--alpha", default=TrapConfig.alpha, show_default=True, help="Level of the verdict.")
@format_option
@friendly_errors
def traps_detect(registry, reference_model, alpha, fmt, **kw):
    """Test a model for the traps of a registry: AUC traps vs controls and an exact one-sided p-value per document."""
    from docaudit import api
    from docaudit.report.traps import detection_table, format_detection

    kw["ref_model"] = reference_model
    result = api.traps_detect(Path(registry), model_config(kw), ref_config(kw), alpha=alpha, progress=show_progress())
    if fmt == "json":
        echo_json(result.as_json())
    elif fmt == "csv":
        echo_csv(detection_table(result))
    else:
        click.echo(format_detection(result))


def detector_options(func):
    options = [
        click.option(
            "--k",
            "k",
            default=DetectorConfig.k,
            show_default=True,
            help="Share of tokens averaged by Min-K% and Min-K%++.",
        ),
        click.option(
            "--pac-copies", default=DetectorConfig.pac_copies, show_default=True, help="PAC: augmented copies per text."
        ),
        click.option("--ref-model", default=None, help="Reference model for method 'ref' (same forms as --model)."),
        click.option(
            "--neighbor-model", default=None, help="Masked LM (HF directory or hub id) for method 'neighbor'."
        ),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(options), func)


def detector_config(kw) -> DetectorConfig:
    return DetectorConfig(k=kw["k"], pac_copies=kw["pac_copies"], seed=kw["seed"])


def ref_config(kw) -> ModelConfig | None:
    return (
        None
        if kw["ref_model"] is None
        else ModelConfig(
            model=kw["ref_model"],
            dtype=kw["dtype"],
            device=kw["device"],
            revision=None,
            trust_remote_code=kw["trust_remote_code"],
        )
    )


FREQ_CORPUS = click.option(
    "--freq-corpus",
    multiple=True,
    type=click.Path(),
    help="DC-PDD: documents whose token frequencies calibrate it (default: the documents given, without labels).",
)


METHOD_HELP = (
    f"Comma-separated detectors (default: {','.join(default_methods())}, plus ref / neighbor when their "
    f"model is given). {methods_help()}. In evaluate, `blind` alone runs only the model-free baseline, "
    "without loading a model."
)


@main.command()
@click.option(
    "--members", multiple=True, type=click.Path(), help="Member documents (dir, .txt or dataset; repeatable)."
)
@click.option("--nonmembers", multiple=True, type=click.Path(), help="Non-member documents (repeatable).")
@labelled_dataset_options
@model_options
@ray_options
@query_options
@click.option("--methods", default=None, help=METHOD_HELP)
@detector_options
@FREQ_CORPUS
@click.option(
    "--sequences",
    default=ScalingConfig.n_sequences,
    show_default=True,
    help="Sequences (windows of --context tokens) sampled per document.",
)
@click.option(
    "--folds", default=MetaConfig.folds, show_default=True, help="k of the k-fold chunks shared by every method."
)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@click.option(
    "--norm",
    type=click.Choice(("auto", *NORMS)),
    default=MetaConfig.norm,
    show_default=True,
    help="Meta-classifier normalization.",
)
@click.option("--features", type=click.Choice(("auto", *FEATURES)), default=MetaConfig.features, show_default=True)
@click.option("--bins", default=MetaConfig.bins, show_default=True, help="HistFE bins.")
@click.option("--trees", default=MetaConfig.n_estimators, show_default=True, help="Random-forest trees.")
@click.option("--meta/--no-meta", default=True, show_default=True, help="Include the meta-classifier.")
@click.option(
    "--blind/--no-blind",
    default=True,
    show_default=True,
    help="Include the model-free baselines (tfidf, nb, dates) on the same folds.",
)
@click.option(
    "--beyond",
    default="auto",
    show_default=True,
    help="The membership score tested for evidence beyond the blind baseline: meta_classifier, a detector "
    "(document average) or DETECTOR:doc_threshold; auto = the meta-classifier, else the first detector; none = skip.",
)
@cleaning_options
@click.option("--out", type=click.Path(), default=None, help="Write evaluation.csv/.json, roc.csv and roc.png here.")
@OVERWRITE
@DROP_DUPLICATES
@strict_option
@format_option
@friendly_errors
def evaluate(
    members,
    nonmembers,
    methods,
    sequences,
    folds,
    seed,
    norm,
    features,
    bins,
    trees,
    meta,
    blind,
    beyond,
    raw,
    normalize_chars,
    out,
    overwrite,
    drop_duplicates,
    strict,
    fmt,
    **kw,
):
    """The meta-classifier and sequence-level detectors side by side on the same k-fold chunks.

    Detectors are scaled to documents three ways (paper sec. 6.2): `sequence` (AUC over sampled windows of
    --context tokens), `doc_avg` (mean sequence score) and `doc_threshold` (share of sequences above a threshold
    chosen on the training chunks). Prints mean ± std over folds of AUC and TPR at 10% / 1% FPR."""
    from docaudit import api
    from docaudit.audit.evaluation import evaluation_json
    from docaudit.corpus.documents import Skips
    from docaudit.methods.blind import KINDS as BLIND_KINDS
    from docaudit.report.tables import (
        format_auc_pivot,
        format_beyond_blind,
        format_methods_table,
        format_query,
    )

    kw["seed"] = seed
    result = api.evaluate(
        members,
        nonmembers,
        Path(out) if out is not None else None,
        overwrite,
        model=model_config(kw),
        query=query_config(kw),
        methods=methods,
        detector=detector_config(kw),
        scaling=ScalingConfig(n_sequences=sequences, seed=seed),
        meta=MetaConfig(norm=norm, features=features, bins=bins, n_estimators=trees) if meta else None,
        folds=folds,
        seed=seed,
        raw=raw,
        normalize_chars=normalize_chars,
        ref_model=ref_config(kw),
        neighbor_model=kw["neighbor_model"],
        blind_kinds=None if not blind else BLIND_KINDS,
        drop_duplicates=drop_duplicates,
        skips=Skips(strict),
        beyond=None if beyond == "none" else beyond,
        freq_corpus=list(kw["freq_corpus"]) or None,
        ray=ray_config(kw),
        progress=show_progress(),
    )
    warn_skipped(result.info["skipped"])
    if result.info["warning"]:
        click.echo(result.info["warning"], err=True)
    if fmt == "json":
        echo_json(evaluation_json(result))
        return
    if fmt == "csv":
        echo_csv(result.table.drop(columns=["configs"], errors="ignore"))
        return
    info = result.info
    model = (
        f"model {info['model_identity']}; query: {format_query(info['query'])}; {sequences} sequences of "
        f"{info['query']['context']} tokens per document"
        if "model_identity" in info
        else "no model (blind baseline only)"
    )
    click.echo(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members{skipped_note(info['skipped'])}; "
        f"{folds}-fold chunks; {model}" + duplicates_note(info["duplicates_dropped"], "; ")
    )
    click.echo(format_methods_table(result.table))
    click.echo("\nAUC by level:")
    click.echo(format_auc_pivot(result.table))
    if result.beyond_blind:
        click.echo("\n" + format_beyond_blind(result.beyond_blind))
    click.echo(f"\nwall time {info['wall_seconds']} s" + (f"; wrote {out}" if out else ""))


@main.command()
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@model_options
@dataset_options
@ray_options
@query_options
@click.option("--methods", default=None, help=METHOD_HELP)
@detector_options
@FREQ_CORPUS
@click.option(
    "--seed", default=QueryConfig.seed, show_default=True, help="Seed of the augmentations (PAC, neighbours)."
)
@cleaning_options
@strict_option
@format_option
@friendly_errors
def score(documents, methods, freq_corpus, seed, raw, normalize_chars, strict, fmt, **kw):
    """Raw membership scores per document, higher = more member-like.

    A document with fewer tokens than --context is one window, scored in one forward pass: its numbers are the
    sequence-level definitions exactly. A longer document is scored over all its windows' tokens (each window an
    independent pass; text methods' extra passes likewise over the whole lowercased / augmented text). With
    --max-tokens every method scores the same excerpt of each document. Each row gives the context and stride
    used; a document that cannot be used is a row saying why."""
    from docaudit import api
    from docaudit.corpus.documents import Skips

    kw["seed"] = seed
    skips = Skips(strict)
    rows = api.score(
        documents,
        model_config(kw),
        methods,
        detector_config(kw),
        query_config(kw),
        ref_config(kw),
        kw["neighbor_model"],
        raw=raw,
        skips=skips,
        normalize_chars=normalize_chars,
        freq_corpus=list(freq_corpus) or None,
        ray=ray_config(kw),
        progress=show_progress(),
    )
    warn_skipped(skips.as_json())
    rows += [{"file": s["file"], "skipped": s["reason"]} for s in skips.as_json()]
    if fmt == "json":
        echo_json(rows)
    elif fmt == "csv":
        echo_csv(rows)
    else:
        import pandas as pd

        click.echo(pd.DataFrame(rows).to_string(index=False, float_format="%.4f"))


@main.command()
@click.option("--members", multiple=True, type=click.Path(), help="Member texts (dir, .txt or dataset; repeatable).")
@click.option("--nonmembers", multiple=True, type=click.Path(), help="Non-member texts (repeatable).")
@sequence_dataset_options
@model_options
@ray_options
@click.option("--methods", default=None, help=METHOD_HELP)
@detector_options
@click.option(
    "--max-context",
    default=SequenceConfig.max_context,
    show_default=True,
    help="Largest window: each text is scored in one window of min(model positions, this) tokens.",
)
@FREQ_CORPUS
@click.option(
    "--recall-prefix",
    type=click.Path(),
    default=None,
    help="ReCaLL: a text file of non-member text put before each text "
    f"(default: {SequenceConfig.recall_shots} non-member texts, left out of the evaluation).",
)
@click.option(
    "--recall-shots",
    default=SequenceConfig.recall_shots,
    show_default=True,
    help="ReCaLL without --recall-prefix: non-member texts taken as the prefix.",
)
@click.option("--n-boot", default=SequenceConfig.n_boot, show_default=True, help="Bootstrap resamples.")
@click.option(
    "--blind-folds",
    default=SequenceConfig.blind_folds,
    show_default=True,
    help="Chunks of the texts for the blind baseline (0: no baseline).",
)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@cleaning_options
@click.option("--out", type=click.Path(), default=None, help="Write the metrics and per-sample scores here.")
@OVERWRITE
@DROP_DUPLICATES
@strict_option
@format_option
@friendly_errors
def sequence(
    members,
    nonmembers,
    methods,
    max_context,
    freq_corpus,
    recall_prefix,
    recall_shots,
    n_boot,
    blind_folds,
    seed,
    raw,
    normalize_chars,
    out,
    overwrite,
    drop_duplicates,
    strict,
    fmt,
    **kw,
):
    """Sequence-level evaluation, as benchmark papers report it: every text (e.g. a WikiMIA row) scored whole by
    every detector, AUC and TPR at 10% / 5% / 1% FPR with 95% bootstrap intervals, overall and per WikiMIA length
    bucket (32/64/128/256 words), and the Min-K% / Min-K%++ k sweep (0.1 to 1.0) from the same query pass.
    --format csv prints the metrics as CSV; --out also saves every text's scores (CSV and JSONL, with its id,
    label and group)."""
    from docaudit import api
    from docaudit.audit.sequence_level import sequence_json
    from docaudit.corpus.documents import Skips

    kw["seed"] = seed
    result = api.sequence(
        members,
        nonmembers,
        Path(out) if out is not None else None,
        overwrite,
        recall_prefix_file=recall_prefix,
        model=model_config(kw),
        methods=methods,
        detector=detector_config(kw),
        config=SequenceConfig(
            max_context=max_context, n_boot=n_boot, seed=seed, recall_shots=recall_shots, blind_folds=blind_folds
        ),
        raw=raw,
        normalize_chars=normalize_chars,
        ref_model=ref_config(kw),
        neighbor_model=kw["neighbor_model"],
        freq_corpus=list(freq_corpus) or None,
        drop_duplicates=drop_duplicates,
        skips=Skips(strict),
        ray=ray_config(kw),
        progress=show_progress(),
    )
    info = result["info"]
    warn_skipped(info["skipped"])
    if info["warning"]:
        click.echo(info["warning"], err=True)
    if fmt == "json":
        echo_json(sequence_json(result))
        return
    metrics = result["metrics"]
    if fmt == "csv":
        click.echo(metrics.to_csv(index=False), nl=False)
        return
    from docaudit.report.tables import format_sequence_metrics

    click.echo(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members{skipped_note(info['skipped'])}; "
        f"model {info['model_identity']}; each text in one window of up to {info['context']} tokens"
        + duplicates_note(info["duplicates_dropped"], "; ")
    )
    click.echo(format_sequence_metrics(metrics))
    click.echo(f"\nwall time {info['wall_seconds']} s" + (f"; wrote {out}" if out else ""))


@main.command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@click.option(
    "--calibrate-members",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Books known to be members (dir or .txt; repeatable).",
)
@click.option(
    "--calibrate-nonmembers",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Books known to be non-members (repeatable).",
)
@dataset_options
@model_options
@ray_options
@click.option(
    "--methods",
    "method",
    default=ContaminationConfig.method,
    show_default=True,
    help=f"The detector that scores the snippets, one of {', '.join(METHODS)}.",
)
@click.option("--method", "method_alias", default=None, hidden=True, help="Former name of --methods.")
@detector_options
@click.option("--snippets", default=ContaminationConfig.snippets, show_default=True, help="Random snippets per book.")
@click.option(
    "--snippet-words", default=ContaminationConfig.snippet_words, show_default=True, help="Words per snippet."
)
@click.option(
    "--target-fpr",
    type=float,
    default=None,
    help="Choose the threshold for this FPR on non-member snippets (default: maximize snippet accuracy).",
)
@click.option(
    "--max-context",
    default=ContaminationConfig.max_context,
    show_default=True,
    help="Largest window: a snippet is scored in one "
    "window of min(model positions, this) tokens, over several windows when longer.",
)
@click.option(
    "--confidence",
    default=ContaminationConfig.confidence,
    show_default=True,
    help="Level of the Wilson and book-level intervals of each rate.",
)
@click.option(
    "--book-bootstrap",
    default=ContaminationConfig.book_bootstrap,
    show_default=True,
    help="Resamples of calibration books and snippets behind the book-level interval.",
)
@click.option(
    "--alpha",
    type=float,
    default=DEFAULT_ALPHA,
    show_default=True,
    help="Level of the per-book verdicts: evidence of membership when the Benjamini-Hochberg q-value is below it.",
)
@click.option("--seed", default=QueryConfig.seed, show_default=True)
@cleaning_options
@click.option("--out", type=click.Path(), required=True, help="Write report.csv, report.html and the plots here.")
@OVERWRITE
@click.option(
    "--drop-duplicates",
    is_flag=True,
    help="Leave out books found in both calibration sets (by default they are an error).",
)
@strict_option
@format_option
@friendly_errors
def report(
    books,
    calibrate_members,
    calibrate_nonmembers,
    method,
    method_alias,
    snippets,
    snippet_words,
    target_fpr,
    max_context,
    confidence,
    book_bootstrap,
    alpha,
    seed,
    raw,
    normalize_chars,
    out,
    overwrite,
    drop_duplicates,
    strict,
    fmt,
    **kw,
):
    """Verdict and contamination rate per book: the share of its random snippets scoring over a threshold
    calibrated on known member and non-member books (Min-K% Prob paper, sec. 5), beside the calibration books' own
    rates, with a Wilson interval, a book-level bootstrap interval and the debiased fraction."""
    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.contamination import reference_ranges, report_warnings
    from docaudit.report.tables import format_beyond_blind

    kw["seed"] = seed
    method = method_alias or method
    if "," in method:
        raise DocauditError(f"--methods {method}: report scores the snippets with one method")
    result = api.report(
        books,
        calibrate_members,
        calibrate_nonmembers,
        Path(out),
        overwrite,
        model=model_config(kw),
        method=method,
        snippets=snippets,
        snippet_words=snippet_words,
        target_fpr=target_fpr,
        detector=detector_config(kw),
        seed=seed,
        max_context=max_context,
        confidence=confidence,
        raw=raw,
        normalize_chars=normalize_chars,
        ref_model=ref_config(kw),
        neighbor_model=kw["neighbor_model"],
        drop_duplicates=drop_duplicates,
        skips=Skips(strict),
        ray=ray_config(kw),
        book_bootstrap_samples=book_bootstrap,
        alpha=alpha,
        progress=show_progress(),
    )
    info = result.info
    warn_skipped(info["skipped"])
    for warning in report_warnings(info):
        click.echo(warning, err=True)
    if fmt == "json":
        echo_json(json.loads((Path(out) / "report.json").read_text(encoding="utf-8")))
        return
    if fmt == "csv":
        echo_csv(result.books)
        return
    click.echo(
        f"{info['n_books']} books, {info['n_calibration_members']} + {info['n_calibration_nonmembers']} "
        f"calibration books{skipped_note(info['skipped'])}; snippets scored with context {info['context']} "
        f"(stride {info['stride']})"
    )
    click.echo(
        f"threshold {result.threshold:.4g} ({info['threshold_rule']}); calibration snippet AUC "
        f"{info['calibration_auc']:.3f}, accuracy {info['calibration_accuracy']:.1%}"
        + duplicates_note(info["duplicates_dropped"], "; calibration: ")
    )
    if info["blind_auc"] is not None:
        click.echo(f"blind baseline (no model) on the calibration books: AUC {info['blind_auc']:.3f}")
    click.echo(f"calibration books, {format_beyond_blind(info['beyond_blind'])}")
    import pandas as pd

    level = f"{info['confidence']:.0%}"
    books = result.books
    shown = pd.DataFrame(
        {
            "book": books.book,
            "snippets": books.n_snippets,
            "rate": books.contamination_rate.map("{:.1%}".format),
            f"book-level {level}": [f"{lo:.1%} – {hi:.1%}" for lo, hi in zip(books.book_ci_low, books.book_ci_high)],
            f"Wilson {level}": [f"{lo:.1%} – {hi:.1%}" for lo, hi in zip(books.ci_low, books.ci_high)],
        }
    )
    click.echo(shown.to_string(index=False))
    from docaudit.report.verdicts import format_report_verdicts

    click.echo(format_report_verdicts(books, info))
    click.echo(
        f"read a rate against the calibration books: {reference_ranges(result.calibration)} A rate inside the "
        "non-members' range is what a book outside the training data gives."
    )
    click.echo(f"wall time {info['wall_seconds']} s; wrote {out}/report.html")


@main.group("config")
def config_group():
    """See the configuration a command would run with."""


@config_group.command("show")
@click.argument("command", nargs=-1, required=True)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The TOML or YAML file the command would read (its section for COMMAND).",
)
@format_option
@friendly_errors
def config_show(command, config_file, fmt):
    """Print every option of COMMAND (e.g. `report`, `data check`) with the value it would take: from --config
    FILE, else its default. The table form is TOML: save it and pass it back with --config."""
    target, ctx, path = main, click.get_current_context(), []
    for name in command:
        if not isinstance(target, click.Group) or name not in target.commands:
            raise DocauditError(f"no command '{' '.join(command)}' (commands: {', '.join(main.commands)})")
        target = target.commands[name]
        path.append(name)
    defaults = config_defaults(target, path, config_file) if config_file else {}
    values, param_required = {}, {}
    for param in target.params:
        if not param.expose_value or param.name in ("config_file",) or getattr(param, "hidden", False):
            continue
        value = defaults[param.name] if param.name in defaults else param.get_default(ctx, call=True)
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, (str, int, float, list)):  # None, or click's marker of an option without default
            value = None
        key = _option_key(param)
        values[key] = value
        param_required[key] = param.required
    if fmt == "json":
        echo_json({".".join(path): values})
    elif fmt == "csv":
        echo_csv([{"option": k, "value": v} for k, v in values.items()])
    else:
        click.echo(f"[{'.'.join(path)}]")
        for key, value in values.items():
            if value is None or value == []:
                click.echo(f"# {key} = ({'required' if param_required[key] else 'not set'})")
            else:
                click.echo(f"{key} = {_toml_value(value)}")


def _toml_value(value) -> str:
    """A value in TOML syntax (strings as JSON strings, which TOML reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


@main.group()
def cache():
    """See and clear the token-statistics cache ($DOCAUDIT_CACHE or ~/.cache/docaudit)."""


@cache.command("info")
@format_option
@friendly_errors
def cache_info(fmt):
    """Size of the token-statistics cache and its entries per model."""
    from docaudit.query.cache import StatsCache

    summary = StatsCache().summary()
    if fmt == "json":
        echo_json(summary)
        return
    rows = [
        {"model": m, "entries": r["entries"], "MB": round(r["bytes"] / 1e6, 2)} for m, r in summary["models"].items()
    ]
    if fmt == "csv":
        echo_csv(rows)
        return
    click.echo(f"{summary['root']}: {summary['entries']} entries, {summary['bytes'] / 1e6:.1f} MB")
    if rows:
        import pandas as pd

        click.echo(pd.DataFrame(rows).to_string(index=False))


@cache.command("clear")
@click.option("--model", default=None, help="Only the entries of this model identity (as `cache info` lists it).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(model, yes):
    """Delete the token-statistics entries docaudit wrote (all, or one model's); nothing else is touched."""
    from docaudit.query.cache import StatsCache

    store = StatsCache()
    summary = store.summary()
    if model is not None and model not in summary["models"]:
        raise DocauditError(f"no cache entries of model '{model}' (models: {', '.join(summary['models']) or 'none'})")
    n = summary["models"][model]["entries"] if model else summary["entries"]
    if n and not yes:
        click.confirm(f"delete {n} cache entries under {summary['root']}?", abort=True, err=True)
    removed = store.clear(model)
    click.echo(f"removed {removed['entries']} entries ({removed['bytes'] / 1e6:.1f} MB) from {summary['root']}")


if __name__ == "__main__":
    main()
