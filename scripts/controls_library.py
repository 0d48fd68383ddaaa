"""The null library shipped for ``controls`` on the embedded model: the per-passage contrasts of never-seen texts.

Texts: the post-2024 books of the shared corpus (first posted to Project Gutenberg in September–December 2024,
after the embedded Gemma-3-270M's training data were collected), in a fixed random order (seed 0), read as
``controls`` reads a book (cleaned). Each is put through ``audit.synthetic_controls.examine_book`` at the
``--preset fast`` settings with the embedded model as generator and target (the default of ``docaudit controls
BOOK``) and the run seed 0; its per-passage contrasts are written with the key ``controls`` checks (the models'
identities, precision and tokenizer, the settings, the reading) and the provenance (each text's file and SHA-256,
the versions, the date, the CPU time). The file is rewritten after every text, so a run stopped early leaves a
usable library and a second run continues where it stopped.

    nice -n 10 python scripts/controls_library.py --texts 40
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
from docaudit.corpus.documents import load_documents
from docaudit.io import atomic_write_text, json_text
from docaudit.provenance import model_record
from docaudit.query.models import load_model
from docaudit.run import DocumentSpec
from docaudit.untrusted import sha256_untrusted

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "nonmembers"
SOURCE = (
    "post-2024 books of the shared corpus: English Project Gutenberg ebooks first posted September-December 2024 "
    "(ebooks 74346-75000), after the embedded model's training data were collected; other editions of some of "
    "these works may have been on the web before"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="folder of never-seen .txt books")
    parser.add_argument("--texts", type=int, default=40, help="how many texts (in the fixed random order)")
    parser.add_argument("--out", type=Path, default=CONTROLS_NULL.resolve())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=48, help="generator rows per call (not in the key)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config, reading, seed = ControlsConfig.preset("fast", batch_size=args.batch_size), DocumentSpec(), 0
    files = sorted(args.corpus.glob("*.txt"))
    files = [files[i] for i in np.random.default_rng(0).permutation(len(files))][: args.texts]
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
        [doc] = load_documents([path], raw=reading.raw, normalize_chars=reading.normalize_chars)
        book = examine_book(doc, models, config, seed)
        if book.contrast is None:
            print(f"{path.name}: left out ({'; '.join(map(str, book.reasons))})", file=sys.stderr)
            continue
        texts.append(text_record(book, path.name, sha256_untrusted(path, "document")))
        provenance = {
            "texts": SOURCE,
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
