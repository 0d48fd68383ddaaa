"""Benchmark: reading and cleaning many documents in worker processes (joblib) against one process.

Both runs read the same files in the same process, serial first as a warm-up of the file cache, then each
measured once; the documents must come out identical and in the same order. Prints one JSON line.
    python scripts/benchmarks/bench_reading.py [DIR ...]   (default: ../shared/corpus/members and nonmembers)
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import docaudit.corpus.documents as documents  # noqa: E402
from docaudit.config import READ_JOBS  # noqa: E402


def timed(paths, jobs: int):
    documents.READ_JOBS = jobs
    started = time.perf_counter()
    docs = documents.load_documents(paths)
    return time.perf_counter() - started, docs


def main() -> None:
    corpus = ROOT.parent / "shared" / "corpus"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="*", default=[str(corpus / "members"), str(corpus / "nonmembers")])
    paths = parser.parse_args().dirs
    timed(paths, 1)  # warm the file cache
    serial, a = timed(paths, 1)
    parallel, b = timed(paths, READ_JOBS)
    assert [(d.path, d.sha256) for d in a] == [(d.path, d.sha256) for d in b]
    print(
        json.dumps(
            {
                "documents": len(a),
                "serial_s": round(serial, 2),
                "parallel_s": round(parallel, 2),
                "speedup": round(serial / parallel, 2),
                "jobs": READ_JOBS,
            }
        )
    )


if __name__ == "__main__":
    main()
