"""Peak memory of `probe`'s work on one large text, stage by stage, each in a fresh process: reading it as
`probe` reads it, then the passages of `ngram` (`--passages 2`), then those of `decop` with a paraphrase file; and
a paraphrase file at its size limit. Peak RSS (``ru_maxrss``) of each child, its baseline (imports) subtracted.

    python scripts/benchmarks/bench_probe_memory.py [--megabytes 200] [--paraphrase-megabytes 250]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus" / "members"

STAGE = r"""
import json, resource, sys
from pathlib import Path
from docaudit.audit import probes
from docaudit.config import ProbeConfig
from docaudit.corpus.documents import load_documents
stage, text_path, para_path = sys.argv[1:4]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if stage == "paraphrases":
    try:
        probes.read_paraphrases(Path(para_path))
        outcome = "read"
    except Exception as e:
        outcome = f"{type(e).__name__}: {str(e)[:120]}"
else:
    doc = load_documents([Path(text_path)])[0]
    outcome = f"{len(doc.text):,} characters"
    if stage == "ngram":
        found = probes.ngram_passages(doc.text, doc.sha256, ProbeConfig(passages=2, samples=1), 0)
        outcome += f", {len(found)} passages"
    elif stage == "decop":
        sources = {"file": probes.read_paraphrases(Path(para_path))}
        found = probes.decop_passages(doc.text, doc.sha256, ProbeConfig(probe="decop", passages=2), sources, 0)
        outcome += f", {len(found)} passages found"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"stage": stage, "mb": round((peak - base) / 1024), "outcome": outcome}))
"""


def make_inputs(folder: Path, megabytes: int) -> tuple[Path, Path]:
    """A text of ``megabytes`` MB (corpus books' bodies, cleaned as docaudit cleans them, one after another) and a
    paraphrase file of two of its passages."""
    from docaudit.corpus.documents import load_documents

    bodies = [d.text for d in load_documents(sorted(CORPUS.glob("*.txt"))[:40])]
    parts, size = [], 0
    while size < megabytes << 20:
        for body in bodies:
            parts.append(body)
            size += len(body.encode())
            if size >= megabytes << 20:
                break
    text = folder / "large.txt"
    text.write_text("\n\n".join(parts), encoding="utf-8")
    words = parts[0].split()
    lines = [
        {"passage": " ".join(words[s : s + 64]), "paraphrases": [f"{k} " + " ".join(words[s : s + 64]) for k in "abc"]}
        for s in (1000, 5000)
    ]
    para = folder / "paraphrases.jsonl"
    para.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return text, para


def huge_paraphrases(path: Path, size: int) -> None:
    """``size`` bytes of distinct short lines: the most objects a file of that size can make."""
    with path.open("w") as f:
        i, written = 0, 0
        while written < size:
            line = json.dumps({"passage": f"a{i} b", "paraphrases": ["c", "d", "e"]}) + "\n"
            f.write(line)
            written += len(line)
            i += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--paraphrase-megabytes", type=int, default=250)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text, para = make_inputs(folder, args.megabytes)
        big = folder / "huge.jsonl"
        huge_paraphrases(big, args.paraphrase_megabytes << 20)
        print(f"text {text.stat().st_size / 1e6:,.0f} MB; paraphrase file {big.stat().st_size / 1e6:,.0f} MB")
        for stage, paraphrases in (("read", para), ("ngram", para), ("decop", para), ("paraphrases", big)):
            child = subprocess.run(
                [sys.executable, "-c", STAGE, stage, str(text), str(paraphrases)],
                capture_output=True,
                text=True,
                check=False,
            )
            print(child.stdout.strip() or child.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
