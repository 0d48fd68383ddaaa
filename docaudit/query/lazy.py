"""torch imported on first use: the command line validates its inputs (and answers a mistake) before the seconds
that importing torch takes, while the query modules keep writing ``torch.x`` as usual."""

from __future__ import annotations

import functools
import importlib
import types


class LazyModule(types.ModuleType):
    """A stand-in for the module of its name, imported when one of its attributes is first read."""

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self.__name__), attr)


torch = LazyModule("torch")


def inference_mode(func):
    """``torch.inference_mode()`` as a decorator that imports torch when ``func`` is called, not when defined."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with torch.inference_mode():
            return func(*args, **kwargs)

    return wrapper
