"""Documents: loading, Project Gutenberg boilerplate removal, hashing."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .errors import DocauditError

START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)
END = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)


@dataclass(frozen=True)
class Document:
    id: str
    path: str
    text: str
    sha256: str


def read_text(path) -> str:
    path = Path(path)
    if not path.is_file():
        raise DocauditError(f"{path}: no such file")
    data = path.read_bytes()
    if not data.strip():
        raise DocauditError(f"{path}: empty file")
    if b"\x00" in data:
        raise DocauditError(f"{path}: binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocauditError(f"{path}: not valid UTF-8 text (byte {e.start})") from e


def strip_gutenberg(text: str) -> str:
    start, end = START.search(text), END.search(text)
    return text[start.end() if start else 0 : end.start() if end else len(text)]


def clean_text(text: str) -> str:
    text = strip_gutenberg(text.replace("\r\n", "\n").replace("\r", "\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def load_document(path, raw: bool = False) -> Document:
    text = read_text(path)
    if not raw:
        text = clean_text(text)
    if not text.strip():
        raise DocauditError(f"{path}: no text left after cleaning")
    return Document(Path(path).stem, str(path), text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def expand_paths(paths) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            files = sorted(p.glob("*.txt"))
            if not files:
                raise DocauditError(f"{p}: directory holds no .txt files")
            out.extend(files)
        elif p.exists():
            out.append(p)
        else:
            raise DocauditError(f"{p}: no such file or directory")
    return out


def load_documents(paths, raw: bool = False, progress: bool = False) -> list[Document]:
    return [load_document(p, raw) for p in tqdm(expand_paths(paths), desc="reading", disable=not progress)]
