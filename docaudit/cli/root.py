"""The ``docaudit`` group and its commands, in the order ``docaudit --help`` lists them."""

from __future__ import annotations

import logging

import click

from docaudit.cli.audit import audit
from docaudit.cli.cache import cache
from docaudit.cli.command import group, quiet_libraries
from docaudit.cli.controls import controls
from docaudit.cli.data import data, dataset_test
from docaudit.cli.echo import escape_unencodable
from docaudit.cli.evaluate import evaluate, score
from docaudit.cli.extract import extract
from docaudit.cli.lab import lab
from docaudit.cli.localize import localize
from docaudit.cli.probe import probe
from docaudit.cli.report import report
from docaudit.cli.sequence import sequence
from docaudit.cli.settings import config_group
from docaudit.cli.train import predict, train
from docaudit.cli.traps import traps
from docaudit.errors import DEBUG_KEY, remember_debug
from docaudit.query.progress import ENGINE_LOG


@group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="docaudit")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=remember_debug,
    help="Show the traceback of an internal error, and llama.cpp's own log lines.",
)
def main():
    """docaudit: was this document in the training data of this language model?"""
    quiet_libraries()
    if click.get_current_context().meta.get(DEBUG_KEY):
        logging.getLogger(ENGINE_LOG).setLevel(logging.DEBUG)
    escape_unencodable()


# the commands in the order of the work (audit a document, evaluate methods, books, sets, traps, experiments,
# housekeeping), each with one short complete line for ``docaudit --help``
COMMANDS = (
    (audit, "Every test that can answer for a book, one statement, one case file."),
    (train, "Train a classifier on known members and non-members."),
    (predict, "Verdict per document from a trained classifier."),
    (evaluate, "Compare every method on the same folds of labelled documents."),
    (report, "Verdict and contamination rate per book."),
    (localize, "Which chapters of a book score like trained text."),
    (controls, "Test one book against synthetic controls written from its own text."),
    (probe, "Test books in a model that only writes text (chat APIs, servers)."),
    (extract, "How much of a book the model writes back verbatim (p_z along the book)."),
    (sequence, "Sequence-level evaluation, as benchmark papers report it."),
    (score, "Raw membership scores per document."),
    (dataset_test, "Test whether a set of suspect documents was trained on."),
    (data, "Inspect document sets before querying a model."),
    (traps, "Plant copyright traps; test a model for them."),
    (lab, "Controlled experiment: train a target on half of a pool."),
    (config_group, "Show the configuration a command would run with."),
    (cache, "See and clear docaudit's cache folder."),
)
for _command, _short in COMMANDS:
    _command.short_help = _short
    main.add_command(_command)
