"""The options that name documents: member and non-member sets, and the columns and split of benchmark datasets
(JSONL, CSV, Parquet, Hugging Face) given where documents are expected."""

from __future__ import annotations

import functools

import click

from docaudit.cli.command import friendly_errors, option
from docaudit.cli.options import apply, config_from, field_option, fields_of
from docaudit.config import DatasetConfig
from docaudit.errors import DocauditError

DOCUMENT_PARAMETERS = (
    "members",
    "nonmembers",
    "documents",
    "books",
    "calibrate_members",
    "calibrate_nonmembers",
    "suspect",
    "former_suspect",
    "set_a",
    "set_b",
)
DATASET_FIELDS = ("text_column", "label_column", "id_column", "group_column", "split")


def documents_option(name: str, help: str, **kwargs):
    """A repeatable option naming documents (a folder, a .txt file or a dataset)."""
    return option(name, multiple=True, type=click.Path(), help=help, section="inputs", **kwargs)


def labelled_sets(noun: str = "documents"):
    """``--members`` and ``--nonmembers``."""
    return apply(
        documents_option("--members", f"Member {noun} (dir, .txt or dataset; repeatable)."),
        documents_option("--nonmembers", f"Non-member {noun} (repeatable)."),
    )


def _dataset_options(labelled: bool, join_groups: bool = True):
    """The options that read benchmark datasets given where documents are expected: their columns and split;
    with ``labelled``, also ``--data`` (one labelled dataset giving both members and non-members by its label
    column). Every document argument naming a dataset is handed on as a ``DatasetSource`` with these columns."""
    group = fields_of(DatasetConfig)["group_column"].metadata["help"].rstrip(".")
    group += ": each group's rows are joined into one document." if join_groups else "; reported per sample."
    options = [field_option(DatasetConfig, n) for n in DATASET_FIELDS if n != "group_column"]
    options.insert(3, field_option(DatasetConfig, "group_column", help=group))
    if labelled:
        options.insert(
            0,
            option(
                "--data",
                multiple=True,
                type=click.Path(),
                help="A labelled dataset (.jsonl, .csv, .parquet, saved HF dataset, hf:NAME[:SPLIT]) giving "
                "members (label 1) and non-members (label 0); instead of or beside --members / --nonmembers.",
                section="inputs",
            ),
        )

    def decorate(func):
        @functools.wraps(func)
        @friendly_errors
        def wrapper(*args, **kwargs):
            from docaudit.corpus.datasets import DatasetSource, as_source

            columns = {n: kwargs.pop(n) for n in DATASET_FIELDS}
            config = config_from(DatasetConfig, columns, join_groups=join_groups)
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

        return apply(*options)(wrapper)

    return decorate


dataset_options = _dataset_options(labelled=False)
labelled_dataset_options = _dataset_options(labelled=True)
sequence_dataset_options = _dataset_options(labelled=True, join_groups=False)
