#!/usr/bin/env python
"""Store the extraction figures of never-seen texts, the baseline ``extract`` gives a book without running them.

Either run ``extract`` on a folder of texts the model cannot have seen (``--texts DIR``, with ``--model`` and
``--backend`` as the command takes them), or take the base model's figures from a run of
``scripts/studies/study_extract_dose.py`` (``--study JSON``: its excerpts drawn again from the corpus, with the study's
own settings, for their SHA-256; the study's base model must be the model given here). Only each text's SHA-256 and
figures are stored, never its words. The library the embedded model ships (``config.EXTRACT_NULL``) was made with

    python scripts/artifacts/extract_library.py --study docs/study/extract_dose_gemma.json \\
        --out models/gemma3-270m-extract-null/library.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from docaudit.audit.extraction_library import library_document, library_key, text_figures  # noqa: E402
from docaudit.config import ExtractConfig, ModelConfig  # noqa: E402
from docaudit.io import atomic_write_text, sha256_text  # noqa: E402

STUDY_TEXTS = (
    "{n} excerpts of {words} words from the middle of English Project Gutenberg books first posted September-"
    "December 2024 (the shared corpus' post-2024 books, drawn at random with seed {seed}), after the embedded "
    "model's training data were collected; figures of the base model in scripts/studies/study_extract_dose.py's run "
    "(docs/study/extract_dose_gemma.json), computed on an NVIDIA H200 in float32 with transformers 5.17 from the "
    "same tensors as docaudit's conversion of the embedded GGUF (a digest of every tensor compared)"
)


def from_texts(folder: Path, model: ModelConfig, config: ExtractConfig) -> tuple[object, list[dict], str]:
    from docaudit.audit.extraction import extract_audit
    from docaudit.corpus.documents import load_documents
    from docaudit.query.models import load_model

    lm = load_model(model)
    docs = load_documents([str(folder)])
    found = extract_audit(docs, [], lm, config)["books"]
    texts = [text_figures(t.document.sha256, t.summary) for t in found]
    return lm, texts, f"{len(texts)} texts of {folder.name}, run with extract's defaults"


def from_study(path: Path, model: ModelConfig, config: ExtractConfig) -> tuple[object, list[dict], str]:
    from studies.study_extract_dose import draw

    from docaudit.query.models import load_model

    study = json.loads(path.read_text(encoding="utf-8"))
    settings = study["settings"]
    args = argparse.Namespace(**{**settings, "corpus": Path(settings["corpus"])})
    if not args.corpus.is_dir():
        args.corpus = Path(ROOT.parent / "shared" / "corpus" / "nonmembers")
    texts, _, _ = draw(args)
    figures = study["extract_base"]["texts"]
    stored = [text_figures(sha256_text(texts[name]), figures[name]) for name in sorted(figures)]
    about = STUDY_TEXTS.format(n=len(stored), words=settings["words"], seed=settings["seed"])
    return load_model(model), stored, about


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--texts", type=Path, help="a folder of texts the model cannot have seen")
    source.add_argument("--study", type=Path, help="the JSON of a scripts/studies/study_extract_dose.py run")
    parser.add_argument("--model", default=None, help="the model (default: the embedded Gemma)")
    parser.add_argument("--backend", default="transformers")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    model, config = ModelConfig(model=args.model, backend=args.backend, device="cpu"), ExtractConfig()
    lm, texts, about = (from_texts if args.texts else from_study)(args.texts or args.study, model, config)
    provenance = {"texts": about, "settings": config.used()}
    document = library_document(library_key(lm, config), provenance, texts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(document, indent=1) + "\n")
    print(f"{len(texts)} texts written to {args.out}")


if __name__ == "__main__":
    main()
