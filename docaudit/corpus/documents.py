"""Documents: reading, Project Gutenberg boilerplate removal, optional character normalization, hashing and filters.

Every command that reads documents goes through :func:`load_documents`, so members and non-members are cleaned
the same way. Cleaning (:func:`clean_text`) removes what is not part of the work and, by default, leaves the
characters of the work exactly as they are: membership signal lives in the exact text a model was trained on, so
a text in which no boilerplate is found (a benchmark snippet) reaches the model unchanged, apart from its line
endings (CRLF/CR -> LF). Steps 1, 6 and 8 run only with ``normalize_chars=True`` (``--normalize-chars``); the
numbers behind that default are in docs/methods.md, "Cleaning".

1. **Character normalization** (:func:`normalize_characters`, opt-in): Unicode NFC, curly quotes and
   apostrophes -> ``'`` and ``"``, em dash / horizontal bar -> ``--`` and en/figure dash, hyphen variants and
   minus -> ``-`` (the ASCII convention most Project Gutenberg texts already use, so both eras look alike),
   ellipsis -> ``...``, non-breaking and other fixed-width spaces -> space, soft hyphens, zero-width characters and
   byte-order marks removed. None of this changes a word, but every one changes the tokens the model sees.
2. **Header and footer removal** (:func:`strip_gutenberg`): keep only the text between the ``*** START OF ...``
   and ``*** END OF ...`` markers (all spellings found in PG files, markers wrapped over several lines, the older
   "Small Print" license blocks), and cut the "End of the Project Gutenberg EBook of ..." closing line.
3. **HTML markup** (only in files that are mostly markup, e.g. an HTML edition saved as ``.txt``): tags removed,
   entities decoded.
4. **Credits**: "Produced by ...", "E-text prepared by ...", "Transcribed from ... by ...", "This etext was
   prepared by ...", "HTML version by ..." and "Note: Project Gutenberg also has an HTML version ..." paragraphs
   (and any paragraph naming Project Gutenberg or its sites) near the beginning or end of the text, and
   paragraphs quoting the PG license ("The Legal Small Print", "Project Gutenberg License") anywhere.
5. **Transcriber's notes**: bracketed ``[Transcriber's Note: ...]`` / ``{...}`` anywhere; note blocks headed
   "Transcriber's Note(s)" near the beginning (up to the next section break: two or more blank lines or a
   separator line); notes in the last few percent of the text (everything from the heading to the end: these are
   lists of corrections); elsewhere, the paragraph holding the heading.
6. **Markup of emphasis** (opt-in): ``_italic_`` -> ``italic``, ``=bold=`` -> ``bold`` and ``~spaced~`` -> ``spaced``
   (the Distributed Proofreaders conventions, far more common in recent productions).
7. **Bare markers**: lines holding only ``[Illustration]`` (or ``[Frontispiece]``, ``[Decoration]`` ...) without a
   caption; captioned ``[Illustration: ...]`` lines are kept, their captions are words of the book.
8. **Whitespace** (opt-in): trailing whitespace stripped on every line, runs of three or more blank lines
   collapsed to one blank line. Indentation is kept (verse, tables).

When any boilerplate was removed, blank and separator-only lines left at either end are trimmed (:func:`trim_ends`).
``raw=True`` skips all of it (the text is only decoded).
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import warnings
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
from joblib import Parallel, delayed
from joblib.parallel import get_active_backend

from docaudit.config import READ_JOBS, READ_JOBS_MIN_FILES
from docaudit.corpus.base import Document, DocumentError, Paths, Skips, shown, skip_warnings
from docaudit.corpus.cleaning import clean_text
from docaudit.corpus.datasets import DatasetSource, is_dataset, read_dataset
from docaudit.corpus.metadata import header_metadata, manifest_metadata
from docaudit.errors import DocauditError
from docaudit.io import sha256_text
from docaudit.untrusted import NotRegular, TooLarge, WouldWait, read_untrusted

log = logging.getLogger(__name__)


def labelled_documents(
    members: Paths,
    nonmembers: Paths,
    raw: bool = False,
    progress: bool = True,
    skips: Skips | None = None,
    drop_duplicates: bool = False,
    normalize_chars: bool = False,
) -> tuple[list[Document], np.ndarray, dict]:
    """Documents of both classes, their labels (1 = member) and the documents found in both sets
    (:func:`separate_sets`: an error, or with ``drop_duplicates`` left out of both). Documents that cannot be used
    are recorded in ``skips`` and left out (without ``skips`` they are an error). A dataset given with
    ``by_label`` (``--data``) is split by its label column, wherever it was given; any other input belongs to the
    set it was given in."""
    given = [_as_list(members), _as_list(nonmembers)]
    by_label = [p for paths in given for p in paths if isinstance(p, DatasetSource) and p.by_label]
    pos, neg = (
        load_documents(
            [p for p in paths if p not in by_label],
            raw=raw,
            progress=progress,
            skips=skips,
            normalize_chars=normalize_chars,
        )
        for paths in given
    )
    for name, docs, other in (("members", pos, 0), ("non-members", neg, 1)):
        if n := sum(d.label == other for d in docs):
            log.warning("%d %s are labelled %d in their dataset (--data splits a dataset by label)", n, name, other)
    for source in by_label:
        docs = read_dataset(source, skips)
        if any(d.label is None for d in docs):
            raise DocauditError(f"{source.location}: --data needs a label column (1 = member, 0 = non-member)")
        pos += [d for d in docs if d.label == 1]
        neg += [d for d in docs if d.label == 0]
    for name, docs in (("members", pos), ("non-members", neg)):
        if not docs:
            raise DocauditError(f"no {name} given (--{name.replace('-', '')}, or --data with a label column)")
    pos, neg, duplicates = separate_sets(pos, neg, drop_duplicates)
    return pos + neg, np.array([1] * len(pos) + [0] * len(neg)), duplicates


def read_text(path: str | os.PathLike) -> str:
    """Read a UTF-8 text file (a leading byte-order mark is dropped). Raises :class:`DocumentError` naming the file
    when it is missing, a broken link or a symlink loop, not a regular file (a folder, FIFO, socket or device),
    larger than ``MAX_DOCUMENT_BYTES``, empty, binary (NUL bytes) or not valid UTF-8. The file is opened without
    blocking and checked again on the opened descriptor, then read with a size cap, so nothing swapped in after
    the first check, and no kernel file that waits for data (``/proc/kmsg``), can hang the run."""
    p = pathlib.Path(path)
    data = _read_regular(p)
    if not data or data.isspace():  # (no stripped copy of a large file)
        raise DocumentError(p, "empty", "empty file")
    if b"\x00" in data:
        raise DocumentError(p, "binary", "binary file (contains NUL bytes), expected UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(
            p, "not UTF-8", f"not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _read_regular(p: pathlib.Path) -> bytes:
    """The bytes of the regular file ``p`` (links followed), at most ``MAX_DOCUMENT_BYTES``, through the one checked
    reader (:func:`docaudit.untrusted.read_untrusted`), its refusals as :class:`DocumentError` naming the file."""
    try:
        return read_untrusted(p, "document")
    except NotRegular:
        raise DocumentError(p, "unreadable", "not a file") from None
    except WouldWait:
        raise DocumentError(
            p, "unreadable", "not an ordinary file: reading it would wait for data (a device or kernel file)"
        ) from None
    except TooLarge as e:
        held = "more than the limit" if e.size is None else f"{e.size:,} bytes, over the limit"
        raise DocumentError(p, "too large", f"{held} of {e.limit:,} bytes for one document") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DocumentError(p, "unreadable", "symlink loop (the link points back to itself)") from None
        if e.errno == errno.ENOENT:
            raise DocumentError(
                p, "unreadable", "broken symlink (its target does not exist)" if p.is_symlink() else "no such file"
            ) from None
        raise DocumentError(p, "unreadable", f"cannot read ({e.strerror or e})") from None


def load_document(path: str | os.PathLike, raw: bool = False, normalize_chars: bool = False) -> Document:
    """Read and (unless ``raw``) clean one file (:func:`clean_text`). Raises :class:`DocumentError` when it cannot
    be read or nothing is left."""
    p = pathlib.Path(path)
    text = read_text(p)
    named = header_metadata(text)
    if named["title"] is None:  # no Project Gutenberg header: a book the shipped manifests name by its bytes
        named = manifest_metadata(sha256_text(text))
    if not raw:
        text = clean_text(text, normalize_chars)
    if not text.strip():
        raise (
            DocumentError(p, "empty", "empty file")
            if raw
            else DocumentError(p, "no text left after cleaning", "no text left after cleaning")
        )
    return Document(id=shown(p.stem), path=shown(p), text=text, sha256=sha256_text(text), **named)


def expand_paths(
    paths: str | os.PathLike | Sequence[str | os.PathLike], outside: dict | None = None
) -> list[pathlib.Path]:
    """Files as given; a directory expands to its ``*.txt`` entries that are not directories (not recursive),
    sorted by name: a broken link among them is kept, to be reported when read. An entry that is a symbolic link
    whose target lies outside the directory is kept too, and recorded in ``outside`` (entry -> target) when given:
    it is never read (:func:`load_documents` skips it), so a link cannot send a file from elsewhere (a key, a
    password file) to a model or server. Raises :class:`DocauditError` for a path that does not exist or a
    directory without ``.txt`` files. A file given twice is kept once."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[pathlib.Path] = []
    seen: set[str] = set()
    for raw_path in paths:
        p = pathlib.Path(raw_path)
        away = {}
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix == ".txt" and not f.is_dir())
            if not files:
                raise DocauditError(f"{p}: directory has no .txt files")
            away = {f: target for f in files if (target := _outside_target(f, p)) is not None}
        elif p.exists() or p.is_symlink():
            files = [p]
        else:
            raise DocauditError(f"{p}: no such file or directory")
        for f in files:
            key = f"link:{f}" if f in away else os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
        if outside is not None:
            outside.update(away)
    return out


def _outside_target(entry: pathlib.Path, folder: pathlib.Path) -> str | None:
    """Where the link ``entry`` of ``folder`` leads when that is outside ``folder``; None for a file that is not a
    link, or a link within the folder (a broken link or a loop is left to be reported when read)."""
    if not entry.is_symlink():
        return None
    try:
        target = pathlib.Path(os.path.realpath(entry, strict=True))
    except (OSError, RuntimeError):
        return None
    return None if target.is_relative_to(pathlib.Path(os.path.realpath(folder))) else str(target)


OUTSIDE_LINK = "link outside its folder"


def _load_or_problem(
    path: pathlib.Path, raw: bool, normalize_chars: bool, outside: str | None = None
) -> tuple[Document | None, tuple | None]:
    """:func:`load_document`, with a document's problem returned as ``(path, kind, reason)`` rather than raised, so
    that a worker process can hand it back; a link to ``outside`` its folder is not read."""
    if outside is not None:
        reason = f"a symbolic link to {shown(outside)}, outside its folder: not read (name the file itself to read it)"
        return None, (str(path), OUTSIDE_LINK, reason)
    try:
        return load_document(path, raw=raw, normalize_chars=normalize_chars), None
    except DocumentError as e:
        return None, (e.path, e.kind, e.reason)


def load_documents(
    paths: Paths, raw: bool = False, progress: bool = False, skips: Skips | None = None, normalize_chars: bool = False
) -> list[Document]:
    """:func:`expand_paths` then :func:`load_document` on each file (in ``READ_JOBS`` worker processes when there
    are at least ``READ_JOBS_MIN_FILES``; the order is kept), with a tqdm bar when ``progress``. A document
    that cannot be used is an error, or, with ``skips``, is recorded there and left out; when none is left that
    is an error all the same (the document's own when there was one). A list of already loaded :class:`Document`
    objects is returned as it is (documents made in memory, e.g. the lab's trained texts, are not read again). A
    path naming a dataset (:func:`docaudit.corpus.datasets.is_dataset`: ``.jsonl``, ``.csv``, ``.parquet``,
    ``hf:...``) is read one document per row instead, verbatim."""
    if isinstance(paths, list) and paths and all(isinstance(p, Document) for p in paths):
        return list(paths)
    paths = _as_list(paths)
    if any(is_dataset(p) for p in paths):
        out = []
        for p in paths:
            out += (
                read_dataset(p, skips) if is_dataset(p) else load_documents([p], raw, progress, skips, normalize_chars)
            )
        return out
    outside: dict = {}
    files = expand_paths(paths, outside)
    jobs = READ_JOBS if len(files) >= READ_JOBS_MIN_FILES else 1
    calls = (delayed(_load_or_problem)(f, raw, normalize_chars, outside.get(f)) for f in files)
    if getattr(get_active_backend()[0], "supports_return_generator", False):
        pending = Parallel(n_jobs=jobs, return_as="generator")(calls)
    else:  # Ray's joblib backend (docs/scaling.md) returns every result at the end
        pending = (result for result in Parallel(n_jobs=jobs)(calls))
    results = pending
    if progress and files:
        from tqdm.auto import tqdm

        results = tqdm(pending, total=len(files), desc="reading documents", unit="doc")
    docs, last = [], None
    try:
        for doc, problem in results:
            if problem is not None:
                error = DocumentError(*problem)
                if skips is None:
                    raise error
                skips.add(error)
                last = error
            else:
                docs.append(doc)
    finally:
        with warnings.catch_warnings():  # stopping at a bad document cancels the files still being read
            warnings.simplefilter("ignore", UserWarning)
            pending.close()
    if not docs and last is not None:
        if len(files) == 1:
            raise last
        given = ", ".join(str(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths))
        raise DocauditError(
            f"none of the {len(files)} documents in {given} can be used: "
            + "; ".join(skip_warnings([asdict(s) for s in skips.items[-len(files) :]]))
        )
    return docs


def _as_list(paths: Paths) -> list:
    """Paths as a list (one path becomes a list of one)."""
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def separate_sets(
    a: list[Document],
    b: list[Document],
    drop_duplicates: bool = False,
    names: tuple[str, str] = ("members", "non-members"),
) -> tuple[list[Document], list[Document], dict]:
    """Check that no text is in both sets: with the same document on both sides a membership label means nothing.
    Texts are compared after cleaning with whitespace runs made one space and the ends stripped
    (:func:`comparable`), so a copy that differs only by a trailing newline or its line breaks is the same
    document. Raises :class:`DocauditError` naming the count and a few files, or with ``drop_duplicates`` leaves
    those documents out of both sets (with a warning). Returns the two sets and ``{"documents": number of texts
    found in both, "files": paths left out}``."""
    key_a, key_b = [comparable(d.text) for d in a], [comparable(d.text) for d in b]
    shared = set(key_a) & set(key_b)
    if not shared:
        return a, b, {"documents": 0, "files": []}
    first = {}
    for d, k in zip(b, key_b):
        first.setdefault(k, d.path)
    pairs = [f"{d.path} = {first[k]}" for d, k in zip(a, key_a) if k in shared]
    what = f"{len(shared)} document{'s are' if len(shared) > 1 else ' is'} both in the {names[0]} and the {names[1]}"
    if not drop_duplicates:
        raise DocauditError(
            f"{what} (same text after cleaning, whitespace aside: {'; '.join(pairs[:3])}"
            f"{'; ...' if len(pairs) > 3 else ''}); remove them from one set, or pass "
            "--drop-duplicates to leave them out of both"
        )
    files = [d.path for d, k in zip(a + b, key_a + key_b) if k in shared]
    log.warning("%s: left out of both (%d files)", what, len(files))
    a = [d for d, k in zip(a, key_a) if k not in shared]
    b = [d for d, k in zip(b, key_b) if k not in shared]
    for name, left in zip(names, (a, b)):
        if not left:
            raise DocauditError(f"{what}: leaving them out leaves no {name}")
    return a, b, {"documents": len(shared), "files": files}


def comparable(text: str) -> str:
    """The hash two texts are compared by for duplicates: of the text with every whitespace run one space and the
    ends stripped."""
    return sha256_text(" ".join(text.split()))


def duplicates_note(duplicates: dict | None, prefix: str = "") -> str:
    """``2 documents found in both sets left out (4 files)`` after ``prefix``, or "" when none were."""
    if not duplicates or not duplicates["documents"]:
        return ""
    n = duplicates["documents"]
    return f"{prefix}{n} document{'s' if n > 1 else ''} found in both sets left out ({len(duplicates['files'])} files)"
