"""The machine's refusals end to end, on a small tmpfs (needs root and a mount): each command should end in one
`error:` line with exit status 74 naming the path, and leave nothing half-written.

    sudo python scripts/checks/check_machine_failures.py

- the cache on a 70 MiB disk: the embedded model's GGUF (253 MB) fills it while being assembled;
- the cache on a disk with 10 MB free: refused before the work;
- the cache folder given as a file, as /dev/null and under /proc;
- an output folder whose file system is made read-only while `evaluate` runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"


def docaudit(env: dict, *args) -> tuple[int, str, float]:
    began = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-m", "docaudit", *map(str, args)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in child.stderr.splitlines() if line.strip()]
    return child.returncode, lines[-1] if lines else "", time.monotonic() - began


def show(name: str, outcome: tuple[int, str, float], disk: Path) -> None:
    status, line, seconds = outcome
    left = sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.is_file())
    print(f"{name}: exit {status} in {seconds:.0f} s; files left {left}\n  {line}")


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("run as root: the check mounts a small tmpfs")
    with tempfile.TemporaryDirectory() as tmp:
        tmp, disk = Path(tmp), Path(tmp) / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=70m", "tmpfs", disk], check=True)
        try:
            doc = tmp / "doc.txt"
            doc.write_text("It was a dark and stormy night; the rain fell in torrents, except at occasional intervals.")
            show("cache on a full disk", docaudit({"DOCAUDIT_CACHE": str(disk / "cache")}, "score", doc), disk)
            (disk / "fill").write_bytes(b"0" * (60 << 20))
            show("10 MB free", docaudit({"DOCAUDIT_CACHE": str(disk / "cache")}, "score", doc), disk)
            (disk / "fill").unlink()
            (tmp / "a-file").write_text("x")
            for cache in (tmp / "a-file", "/dev/null", "/proc/self/cache"):
                show(f"cache {cache}", docaudit({"DOCAUDIT_CACHE": str(cache)}, "score", doc), disk)
            sets = []
            for group in ("members", "nonmembers"):
                folder = tmp / group
                folder.mkdir()
                for i, book in enumerate(sorted((CORPUS / group).glob("*.txt"))[:4]):
                    (folder / f"{i}.txt").write_text(book.read_text(encoding="utf-8")[1500:3000])
                sets.append(folder)
            remount = threading.Timer(20, subprocess.run, (["mount", "-o", "remount,ro", disk],))
            remount.start()
            args = ("evaluate", "--members", sets[0], "--nonmembers", sets[1], "--methods", "loss", "--folds", "4")
            show(
                "read-only mid-run",
                docaudit({"DOCAUDIT_CACHE": str(tmp / "cache")}, *args, "--out", disk / "out"),
                disk,
            )
            remount.cancel()
        finally:
            subprocess.run(["umount", disk], check=False)


if __name__ == "__main__":
    main()
