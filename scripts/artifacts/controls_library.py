"""The null library shipped for ``controls`` on the embedded model: the per-passage contrasts of never-seen texts.

Texts: the post-2024 books of the shared corpus (first posted to Project Gutenberg in September–December 2024,
after the embedded Gemma-3-270M's training data were collected), in a fixed random order (seed 0), read as
``controls`` reads a book (cleaned) and cut to ``--excerpt-words`` words from its middle (8,000 by default: about
11,500 Gemma tokens, 16 stretches of 704 tokens, so that a book of 16 passages is matched by most texts' passages;
docs/methods.md, "Matched geometry"). Each excerpt is put through ``audit.synthetic_controls.examine_book`` at the
``--preset fast`` settings with the embedded model as generator and target (the default of ``docaudit controls
BOOK``) and the run seed 0; its per-passage contrasts are written with the key ``controls`` checks (the models'
identities, precision and tokenizer, the settings, the reading) and the provenance (each text's file and SHA-256,
the versions, the date, the CPU time). The file is rewritten after every text, so a run stopped early leaves a
usable library and a second run continues where it stopped.

    nice -n 10 python scripts/artifacts/controls_library.py --texts 21

``--part K/N`` computes the texts K, K + N, ... into ``--out`` (so N processes can share the work); ``--merge
PART...`` writes their texts, in the fixed order, into ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers

import docaudit
from docaudit.audit.controls_library import FORMAT, library_document, null_key, text_record
from docaudit.audit.synthetic_controls import examine_book
from docaudit.config import CONTROLS_NULL, ControlsConfig, ModelConfig
from docaudit.corpus.base import Document
from docaudit.corpus.documents import load_documents
from docaudit.io import atomic_write_text, json_text, sha256_text
from docaudit.provenance import model_record
from docaudit.query.models import load_model
from docaudit.run import DocumentSpec
from docaudit.untrusted import sha256_untrusted

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nonmembers"
SOURCE = (
    "post-2024 books of the shared corpus: English Project Gutenberg ebooks first posted September-December 2024 "
    "(ebooks 74346-75000), after the embedded model's training data were collected; other editions of some of "
    "these works may have been on the web before; each cut to {words} words from the middle of its cleaned text "
    "(sha256: the excerpt's; source_sha256: the whole cleaned text's)"
)


def excerpt(doc: Document, words: int) -> Document:
    """The middle ``words`` words of a document's text (all of it when shorter), as a document of its own."""
    tokens = doc.text.split(" ")
    start = max(0, (len(tokens) - words) // 2)
    text = " ".join(tokens[start : start + words])
    return Document(doc.id, doc.path, text, sha256_text(text))


def add_profiles(path: Path, corpus: Path, words: int) -> None:
    """Each text of the library at ``path`` given its model-free profile (``audit.library_check``), its excerpt cut
    again from ``corpus`` and checked against the stored SHA-256."""
    from docaudit.audit.library_check import profile_of

    data = json.loads(path.read_text(encoding="utf-8"))
    for t in data["texts"]:
        [whole] = load_documents([corpus / t["file"]], raw=False, normalize_chars=False)
        doc = excerpt(whole, words)
        if doc.sha256 != t["sha256"]:
            sys.exit(f"{t['file']}: its excerpt is not the stored text (SHA-256 differs)")
        t["profile"] = profile_of(doc.text)
    atomic_write_text(path, json_text(data))
    print(f"{len(data['texts'])} profiles written to {path}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="folder of never-seen .txt books")
    parser.add_argument("--texts", type=int, default=40, help="how many texts (in the fixed random order)")
    parser.add_argument("--out", type=Path, default=CONTROLS_NULL.resolve())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=48, help="generator rows per call (not in the key)")
    parser.add_argument("--excerpt-words", type=int, default=8000, help="words from the middle of each text")
    parser.add_argument("--part", default="0/1", help="K/N: the texts K, K + N, ... of the fixed order")
    parser.add_argument("--merge", nargs="+", type=Path, help="parts to write together into --out")
    parser.add_argument(
        "--add-profiles", action="store_true", help="add each stored text's model-free profile (no model runs)"
    )
    args = parser.parse_args()
    if args.add_profiles:
        add_profiles(args.out, args.corpus, args.excerpt_words)
        return
    torch.set_num_threads(args.threads)
    config, reading, seed = ControlsConfig.preset("fast", batch_size=args.batch_size), DocumentSpec(), 0
    files = sorted(args.corpus.glob("*.txt"))
    files = [files[i] for i in np.random.default_rng(0).permutation(len(files))][: args.texts]
    if args.merge:
        parts = [json.loads(p.read_text(encoding="utf-8")) for p in args.merge]
        if any(p["key"] != parts[0]["key"] or p.get("format") != FORMAT for p in parts):
            sys.exit("the parts were computed with different keys or formats")
        by_file = {t["file"]: t for p in parts for t in p["texts"]}
        texts = [by_file[f.name] for f in files if f.name in by_file]
        atomic_write_text(args.out, json_text(library_document(parts[0]["key"], parts[0]["provenance"], texts)))
        print(f"{len(texts)} texts written to {args.out}", file=sys.stderr)
        return
    k, n = (int(x) for x in args.part.split("/"))
    files = files[k::n]
    lm = load_model(ModelConfig())
    models = {"generator": lm, "target": lm}
    key = null_key(models, config, reading)
    texts = []
    if args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        texts = old["texts"] if old.get("key") == key and old.get("format") == FORMAT else []
    done = {t["file"] for t in texts}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for path in files:
        if path.name in done:
            continue
        began = time.time()
        [whole] = load_documents([path], raw=reading.raw, normalize_chars=reading.normalize_chars)
        doc = excerpt(whole, args.excerpt_words)
        book = examine_book(doc, models, config, seed)
        if book.contrast is None:
            print(f"{path.name}: left out ({'; '.join(map(str, book.reasons))})", file=sys.stderr)
            continue
        texts.append(text_record(book, path.name, sha256_untrusted(path, "document"), whole.sha256))
        provenance = {
            "texts": SOURCE.format(words=args.excerpt_words),
            "seed": seed,
            "generator_and_target": model_record(lm),
            "versions": {
                "docaudit": docaudit.__version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "python": platform.python_version(),
            },
            "threads": args.threads,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        atomic_write_text(args.out, json_text(library_document(key, provenance, texts)))
        print(f"{path.name}: {len(texts)} texts, {time.time() - began:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
