"""Manifests: CSV lists of documents with their membership label, metadata and (optionally) content hash.

Columns (all required in the header, in any order; see ``data_manifests/README.md``):
``id, source, group, label, title, author, language, pg_posted, pub_year, sha256, n_bytes, path``.
``id`` and ``label`` (``member`` | ``nonmember``) must be filled in; ids are unique; ``sha256`` is empty or 64 hex
digits; ``pub_year`` and ``n_bytes`` are empty or integers; ``path`` is relative to the corpus root (or to the
download folder of ``scripts/artifacts/fetch_gutenberg.py``).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import pathlib
import re
from dataclasses import asdict, dataclass

from docaudit.errors import DocauditError
from docaudit.io import atomic_write_text
from docaudit.untrusted import open_untrusted, sha256_untrusted

COLUMNS = (
    "id",
    "source",
    "group",
    "label",
    "title",
    "author",
    "language",
    "pg_posted",
    "pub_year",
    "sha256",
    "n_bytes",
    "path",
)


LABELS = ("member", "nonmember")


_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


_LANGUAGE_CODES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "spanish": "es",
    "italian": "it",
    "finnish": "fi",
    "dutch": "nl",
    "portuguese": "pt",
    "latin": "la",
    "swedish": "sv",
    "danish": "da",
    "norwegian": "no",
}


@dataclass
class ManifestRow:
    """One book of a manifest: id, label, where it comes from, catalogue data and the expected size and sha256."""

    id: str
    label: str
    source: str = ""
    group: str = ""
    title: str = ""
    author: str = ""
    language: str = ""
    pg_posted: str = ""
    pub_year: int | None = None
    sha256: str = ""
    n_bytes: int | None = None
    path: str = ""

    @property
    def is_member(self) -> bool:
        """True for a member (``label == "member"``)."""
        return self.label == "member"

    def to_csv(self) -> dict[str, str]:
        """The row as CSV cells in ``COLUMNS`` order (None as an empty cell)."""
        d = asdict(self)
        return {c: "" if d[c] is None else str(d[c]) for c in COLUMNS}


def _int_or_none(value: str, column: str, where: str) -> int | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise DocauditError(f"{where}: column {column} must be an integer, got {value!r}") from None


def validate_rows(rows: list[ManifestRow], where: str = "manifest") -> None:
    """Raise :class:`DocauditError` on the first problem: empty id, bad label, duplicate id, malformed sha256."""
    seen: dict[str, int] = {}
    for i, row in enumerate(rows, start=1):
        loc = f"{where}: row {i}"
        if not row.id:
            raise DocauditError(f"{loc}: empty id")
        if row.label not in LABELS:
            raise DocauditError(f"{loc} (id {row.id}): label must be 'member' or 'nonmember', got {row.label!r}")
        if row.id in seen:
            raise DocauditError(f"{loc}: duplicate id {row.id} (first in row {seen[row.id]})")
        seen[row.id] = i
        if row.sha256 and not _SHA_RE.match(row.sha256):
            raise DocauditError(f"{loc} (id {row.id}): sha256 must be 64 lowercase hex digits")
        if row.n_bytes is not None and row.n_bytes < 0:
            raise DocauditError(f"{loc} (id {row.id}): negative n_bytes")
        if row.path and (
            pathlib.PurePosixPath(row.path).is_absolute() or ".." in pathlib.PurePosixPath(row.path).parts
        ):
            raise DocauditError(f"{loc} (id {row.id}): path must be relative and stay inside the root")


def _read_csv(path: pathlib.Path, required, what: str) -> list[dict]:
    """The records of a CSV file that must exist and have the ``required`` columns."""
    try:
        raw = open_untrusted(path, "manifest")
    except FileNotFoundError:
        raise DocauditError(f"{path}: no such {what}") from None
    except OSError as e:
        raise DocauditError(f"{path}: cannot read the {what} ({e})") from None
    try:
        with io.TextIOWrapper(raw, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise DocauditError(f"{path}: {what} is missing column(s) {', '.join(missing)}")
            return list(reader)
    except UnicodeDecodeError as e:
        raise DocauditError(f"{path}: {what} is not valid UTF-8 (byte offset {e.start})") from None
    except csv.Error as e:  # a field over the csv module's limit, a NUL byte
        raise DocauditError(f"{path}: {what} is not a readable CSV ({str(e)[:200]})") from None


def read_manifest(path: str | os.PathLike) -> list[ManifestRow]:
    """Read and validate a manifest CSV."""
    p = pathlib.Path(path)
    rows = []
    for i, rec in enumerate(_read_csv(p, COLUMNS, "manifest"), start=1):
        where = f"{p}: row {i}"
        rec = {k: (v or "").strip() for k, v in rec.items() if k is not None}
        rows.append(
            ManifestRow(
                id=rec["id"],
                label=rec["label"],
                source=rec["source"],
                group=rec["group"],
                title=rec["title"],
                author=rec["author"],
                language=rec["language"],
                pg_posted=rec["pg_posted"],
                pub_year=_int_or_none(rec["pub_year"], "pub_year", where),
                sha256=rec["sha256"].lower(),
                n_bytes=_int_or_none(rec["n_bytes"], "n_bytes", where),
                path=rec["path"],
            )
        )
    if not rows:
        raise DocauditError(f"{p}: manifest has no rows")
    validate_rows(rows, str(p))
    return rows


def check_manifest_path(path: str | os.PathLike, overwrite: bool = False) -> None:
    """Refuse a manifest path that is not a new file in a folder, or an earlier manifest replaced with ``overwrite``:
    docaudit never writes over a file it did not write."""
    p = pathlib.Path(path)
    if not p.exists():
        parent = next(a for a in p.absolute().parents if a.exists())
        if not parent.is_dir():
            raise DocauditError(f"{p}: cannot be created, {parent} is a file")
        return
    if not p.is_file():
        raise DocauditError(f"{p} exists and is not a file")
    if not overwrite:
        raise DocauditError(f"{p} exists; pass --overwrite to replace it")
    try:
        with io.TextIOWrapper(open_untrusted(p, "manifest"), encoding="utf-8", errors="replace") as fh:
            header = fh.readline(1 << 16).strip()
    except OSError:
        header = None
    if header != ",".join(COLUMNS):
        raise DocauditError(f"{p} is not a docaudit manifest; not replacing it")


def write_manifest(rows: list[ManifestRow], path: str | os.PathLike, overwrite: bool = False) -> None:
    """Validate and write atomically (temporary file + rename) to a new file, or over an earlier manifest with
    ``overwrite`` (:func:`check_manifest_path`)."""
    validate_rows(rows, str(path))
    check_manifest_path(path, overwrite)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.to_csv())
    atomic_write_text(pathlib.Path(path), out.getvalue())


def posted_interval(value: str) -> tuple[dt.date, dt.date] | None:
    """The first and last day a posting date can mean: ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``; None if unreadable."""
    value = (value or "").strip()
    try:
        if re.fullmatch(r"\d{4}", value):
            y = int(value)
            return dt.date(y, 1, 1), dt.date(y, 12, 31)
        if re.fullmatch(r"\d{4}-\d{2}", value):
            y, m = (int(x) for x in value.split("-"))
            first = dt.date(y, m, 1)
            nxt = dt.date(y + (m == 12), m % 12 + 1, 1)
            return first, nxt - dt.timedelta(days=1)
        d = dt.date.fromisoformat(value)
        return d, d
    except ValueError:
        return None


def parse_cutoff(value: str) -> dt.date:
    """The ``--cutoff`` date (YYYY-MM-DD), or a one-line error."""
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise DocauditError(f"cutoff must be a date YYYY-MM-DD, got {value!r}") from None


def language_code(name: str) -> str:
    """A catalogue's language name as an ISO 639-1 code (``English`` -> ``en``); an unknown name is kept as is."""
    return _LANGUAGE_CODES.get((name or "").strip().lower(), (name or "").strip())


def build_manifest(
    catalog: str | os.PathLike,
    cutoff: str,
    members_group: str | None = "pg19",
    source: str = "gutenberg",
    hashes: bool = True,
) -> tuple[list[ManifestRow], dict[str, str]]:
    """Rows of a manifest from a catalog CSV (columns ``id, group, pg_posted`` required; ``file, title, author,
    language, pg19_pubyear`` or ``pub_year``, ``n_bytes, sha256`` used when present) and a cutoff date.

    Members: the rows of ``members_group`` (or, when it is empty/None, the rows posted before the cutoff);
    non-members: rows posted on or after the cutoff. Rows that are neither (posted before the cutoff but outside
    the members group, a posting period that straddles the cutoff, no readable date) are left out; returns
    ``(rows, excluded)`` with ``excluded = {id: reason}``. ``hashes=False`` leaves ``sha256`` and ``n_bytes``
    empty (for fetching current copies from a mirror, whose bytes may differ from the catalog's).
    """
    cut = parse_cutoff(cutoff)
    p = pathlib.Path(catalog)
    records = _read_csv(p, ("id", "group", "pg_posted"), "catalog")
    rows, excluded = [], {}
    for rec in records:
        rid = (rec.get("id") or "").strip()
        group = (rec.get("group") or "").strip()
        posted = (rec.get("pg_posted") or "").strip()
        span = posted_interval(posted)
        in_group = bool(members_group) and group == members_group
        if in_group:
            if span is not None and span[0] >= cut:
                excluded[rid] = f"in group {members_group} but posted {posted}, after the cutoff {cutoff}"
                continue
            label = "member"
        elif span is None:
            excluded[rid] = f"posting date {posted!r} unreadable"
            continue
        elif span[0] >= cut:
            label = "nonmember"
        elif span[1] < cut:
            if members_group:
                excluded[rid] = f"posted {posted}, before the cutoff, but not in group {members_group}"
                continue
            label = "member"
        else:
            excluded[rid] = f"posting period {posted} straddles the cutoff {cutoff}"
            continue
        year = (rec.get("pub_year") or rec.get("pg19_pubyear") or "").strip()
        rows.append(
            ManifestRow(
                id=rid,
                label=label,
                source=source,
                group=group,
                title=(rec.get("title") or "").strip(),
                author=(rec.get("author") or "").strip(),
                language=language_code(rec.get("language", "")),
                pg_posted=posted,
                pub_year=_int_or_none(year, "pub_year", f"{p}: id {rid}"),
                sha256=(rec.get("sha256") or "").strip().lower() if hashes else "",
                n_bytes=_int_or_none(rec.get("n_bytes", ""), "n_bytes", f"{p}: id {rid}") if hashes else None,
                path=(rec.get("file") or rec.get("path") or f"{rid}.txt").strip(),
            )
        )
    validate_rows(rows, str(p))
    return rows, excluded


def resolve_path(row: ManifestRow, root: str | os.PathLike) -> pathlib.Path:
    """The row's file under ``root``: its ``path``, or ``<id>.txt``."""
    return pathlib.Path(root) / (row.path or f"{row.id}.txt")


def verify_files(rows: list[ManifestRow], root: str | os.PathLike) -> list[str]:
    """Problems found checking the rows' files under ``root``: missing files, size or sha256 mismatches (one line
    each; empty when everything matches)."""
    problems = []
    for row in rows:
        f = resolve_path(row, root)
        if not f.is_file():
            problems.append(f"{row.id}: {f} missing")
            continue
        if row.n_bytes is not None and f.stat().st_size != row.n_bytes:
            problems.append(f"{row.id}: {f} has {f.stat().st_size} bytes, manifest says {row.n_bytes}")
            continue
        try:
            if row.sha256 and sha256_untrusted(f, "document") != row.sha256:
                problems.append(f"{row.id}: {f} sha256 differs from the manifest")
        except OSError as e:
            problems.append(f"{row.id}: {f} cannot be read ({e.strerror or e})")
    return problems


def split_labels(rows: list[ManifestRow], root: str | os.PathLike) -> tuple[list[pathlib.Path], list[int]]:
    """File paths under ``root`` and labels (1 = member) in manifest order."""
    return [resolve_path(r, root) for r in rows], [int(r.is_member) for r in rows]


__all__ = [
    "COLUMNS",
    "LABELS",
    "ManifestRow",
    "read_manifest",
    "write_manifest",
    "check_manifest_path",
    "validate_rows",
    "build_manifest",
    "posted_interval",
    "parse_cutoff",
    "verify_files",
    "resolve_path",
    "split_labels",
]
