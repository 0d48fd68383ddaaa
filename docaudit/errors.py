"""The exceptions that reach users as a one-line message, and the exit status of each kind of failure.

======  ===========================================================================================================
status  meaning
======  ===========================================================================================================
0       success
2       usage error: the command line or its ``--config`` file (unknown option, missing argument, bad value type)
3       bad input: a document, data set, classifier, registry, cache entry, output folder or option value docaudit
        refuses (:class:`DocauditError`, :class:`InputError`)
4       a model or backend that cannot be loaded or reached: unknown model, missing weights or package, a device
        that is not there, a server that does not answer (:class:`ModelError`); a native engine that crashed the
        command's process (``cli/guard.py``)
70      internal error: a failure of docaudit itself; one line says where to report it (``docaudit --debug ...``
        shows the traceback)
74      the machine refused a file or folder docaudit needs (:class:`MachineError`): a full disk, a read-only file
        system, no permission, a file or a kernel file system (``/proc``, ``/sys``, ``/dev``) where a folder is
        needed, too little free space before the run; one line names the path and the cause
130     interrupted (Ctrl-C); finished documents are cached
141     the reader of the output went away (``docaudit cache info | head``): stopped quietly, as after SIGPIPE
======  ===========================================================================================================
"""

from __future__ import annotations

import errno
import sys
import traceback

USAGE = 2
BAD_INPUT = 3
MODEL_UNAVAILABLE = 4
INTERNAL = 70  # EX_SOFTWARE of sysexits.h
MACHINE = 74  # EX_IOERR of sysexits.h
INTERRUPTED = 130
BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command its pipe's reader left

REPORT_TO = "the docaudit maintainers (the project's issue tracker)"


class DocauditError(Exception):
    """A problem with the user's input or setup; the CLI prints it on one line and exits with ``exit_code``."""

    exit_code = BAD_INPUT


class InputError(DocauditError):
    """Input data or an option value that docaudit refuses (the status of every :class:`DocauditError`)."""


class ModelError(DocauditError):
    """A model or backend that cannot be loaded or reached."""

    exit_code = MODEL_UNAVAILABLE


class MachineError(DocauditError):
    """The machine refused a file or folder docaudit needs (the user's environment, not docaudit's failure)."""

    exit_code = MACHINE


# what the machine's refusals mean, by errno: the user's environment, never a failure of docaudit
CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file would be larger than the file system or ulimit -f allows",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.ELOOP: "its links loop",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EMFILE: "too many open files (ulimit -n)",
    errno.EIO: "the device reported an input/output error",
}


def cause_of(error: OSError) -> str | None:
    """The machine's refusal ``error`` in words (:data:`CAUSES`, with the system's own), or None for another."""
    cause = CAUSES.get(getattr(error, "errno", None))
    return None if cause is None else f"{cause} ({error.strerror or errno.errorcode[error.errno]})"


def machine_error(error: OSError) -> MachineError | None:
    """``error`` as a :class:`MachineError` naming its files and the cause, when its errno is one of the machine's
    refusals (:data:`CAUSES`); None for anything else."""
    if (cause := cause_of(error)) is None:
        return None
    names = [str(n) for n in (error.filename, error.filename2) if n is not None]
    return MachineError(f"cannot use {' -> '.join(names) or 'a file docaudit reads or writes'}: {cause}")


def restated(error: DocauditError, message: str) -> DocauditError:
    """``message`` (the cause named with where it happened) as an error of ``error``'s kind, so one cause keeps one
    exit status wherever it surfaces."""
    return (ModelError if isinstance(error, ModelError) else DocauditError)(message)


def _refusal(error: BaseException) -> MachineError | None:
    """The machine's refusal among ``error`` and the exceptions it was raised from (``raise ... from``), or None."""
    seen = set()
    while error is not None and id(error) not in seen and not isinstance(error, DocauditError):
        seen.add(id(error))
        if isinstance(error, OSError) and (refused := machine_error(error)) is not None:
            return refused
        error = error.__cause__
    return None


def report_error(error: Exception, debug: bool = False, stream=None) -> int:
    """What the command line does with an exception of a command: a DocauditError is its ``error:`` line and its
    exit status; an ``OSError`` that is the machine's refusal (a full disk, a read-only folder: :data:`CAUSES`),
    raised or the named cause of what was raised, is a :class:`MachineError`'s line; anything else is a failure of
    docaudit itself, one line saying so and where to report it (with ``debug``, the traceback before it), status
    :data:`INTERNAL`. click's own exceptions (usage errors, ``--help``,
    an aborted confirmation) are raised again for click to handle."""
    import click

    if isinstance(error, (click.ClickException, click.exceptions.Exit, click.exceptions.Abort)):
        raise error
    stream = sys.stderr if stream is None else stream
    if (refused := _refusal(error)) is not None:
        if debug:
            traceback.print_exception(type(error), error, error.__traceback__, file=stream)
        error = refused
    if isinstance(error, DocauditError):
        print(f"error: {error}", file=stream)
        return error.exit_code
    from docaudit import __version__

    if debug:
        traceback.print_exception(type(error), error, error.__traceback__, file=stream)
    problem = (str(error).strip().splitlines() or [""])[0]
    print(
        f"error: internal error in docaudit {__version__} ({type(error).__name__}"
        + (f": {problem[:200]}" if problem else "")
        + f"); please report it to {REPORT_TO} with the command"
        + ("" if debug else ", and run it again with docaudit --debug to see the traceback"),
        file=stream,
    )
    return INTERNAL


def remember_debug(ctx, _param, value) -> None:
    """The callback of the group's ``--debug`` flag: recorded where every command's error handler sees it."""
    ctx.meta[DEBUG_KEY] = ctx.meta.get(DEBUG_KEY, False) or value


DEBUG_KEY = "docaudit.debug"
