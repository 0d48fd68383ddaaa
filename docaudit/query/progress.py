"""Whether the running call shows progress (``RunContext.progress``, set for the call by the API), and what the
query layer shows with it: a step line for loading a model, and the libraries' own bars only then. Without it
nothing is printed, by docaudit or by the libraries it loads a model with (transformers, huggingface_hub)."""

from __future__ import annotations

import functools
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ENGINE_LOG = "docaudit.engine"  # an engine's own log lines (llama.cpp's), at DEBUG: shown by --debug only

_SHOWN: ContextVar[bool] = ContextVar("docaudit_progress", default=False)
# what the running query's bar does with scored tokens as the backend scores them (None: no bar)
_ADVANCE: ContextVar[Callable[[int], None] | None] = ContextVar("docaudit_advance", default=None)


def shown() -> bool:
    """Whether the running call shows progress."""
    return _SHOWN.get()


@contextmanager
def showing(progress: bool) -> Iterator[None]:
    """Progress shown (or not) for the calls made within the block."""
    token = _SHOWN.set(bool(progress))
    try:
        yield
    finally:
        _SHOWN.reset(token)


@contextmanager
def _library_bars_off() -> Iterator[None]:
    """The progress bars of transformers and huggingface_hub off for the block (a model is loading, so both are
    imported by now or about to be), then as they were."""
    import huggingface_hub.utils as hub
    import transformers.utils.logging as tf_logging

    hub_was_off, tf_was_on = hub.are_progress_bars_disabled(), tf_logging.is_progress_bar_enabled()
    hub.disable_progress_bars()
    tf_logging.disable_progress_bar()
    try:
        with gguf_bars_off(load=False):
            yield
    finally:
        if not hub_was_off:
            hub.enable_progress_bars()
        if tf_was_on:
            tf_logging.enable_progress_bar()


GGUF_MODULE = "transformers.modeling_gguf_pytorch_utils"


@contextmanager
def gguf_bars_off(load: bool = True) -> Iterator[None]:
    """Without progress shown, the bar transformers shows from tqdm directly while it reads a GGUF file (where its
    version has one) off for the block; ``load``: its module imported first, else only when imported already (it
    takes a second or two to import, and a model already converted never reads its GGUF file)."""
    gguf = None
    if not shown():
        try:
            gguf = importlib.import_module(GGUF_MODULE) if load else sys.modules.get(GGUF_MODULE)
        except ImportError:
            gguf = None
    bar = getattr(gguf, "tqdm", None)
    if bar is not None:
        gguf.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf.tqdm = bar


@contextmanager
def loading_step(what: str) -> Iterator[None]:
    """Loading ``what``: with progress, a line on stderr before and one with the time it took after; without, the
    libraries' bars off for the block."""
    if not shown():
        with _library_bars_off():
            yield
        return
    print(f"loading model {what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    print(f"loaded model {what} in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


@contextmanager
def counting(advance: Callable[[int], None]) -> Iterator[None]:
    """Within the block, the scored tokens a backend reports (:func:`scored`) go to ``advance``."""
    token = _ADVANCE.set(advance)
    try:
        yield
    finally:
        _ADVANCE.reset(token)


def scored(n: int) -> None:
    """A backend has scored ``n`` more tokens: the running query's bar moves (a single long document too)."""
    advance = _ADVANCE.get()
    if advance is not None:
        advance(n)
