"""Sequence-level membership detectors, each oriented so that higher means more member-like.

Each family module registers its detectors with :func:`registry.register`; importing this package registers them
all, in the order the command line lists them."""

from docaudit.methods.detectors import likelihood, mink, pac, reference, neighborhood, dcpdd, recall  # noqa: F401, I001  (order of the list)
from docaudit.methods.detectors.registry import (
    METHODS,
    PASSES,
    default_methods,
    methods_help,
    resolve_methods,
)

__all__ = ["METHODS", "PASSES", "default_methods", "methods_help", "resolve_methods"]
