"""The ``docaudit`` group and its commands, in the order ``docaudit --help`` lists them."""

from __future__ import annotations

import click

from docaudit.cli.cache import cache
from docaudit.cli.command import group, quiet_libraries
from docaudit.cli.controls import controls
from docaudit.cli.data import data, dataset_test
from docaudit.cli.evaluate import evaluate, score
from docaudit.cli.lab import lab
from docaudit.cli.report import report
from docaudit.cli.sequence import sequence
from docaudit.cli.settings import config_group
from docaudit.cli.train import predict, train
from docaudit.cli.traps import traps
from docaudit.errors import remember_debug


@group(context_settings={"help_option_names": ["-h", "--help"]})
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
    quiet_libraries()


for _command in (
    train,
    predict,
    controls,
    lab,
    dataset_test,
    data,
    traps,
    evaluate,
    score,
    sequence,
    report,
    config_group,
    cache,
):
    main.add_command(_command)
