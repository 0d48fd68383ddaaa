"""Time and peak memory of reading a ``--config`` file at its size limit (``READ_LIMITS["config"]``; a YAML file
at ``CONFIG_YAML_CHARACTERS``) in the spellings that cost most: the shape scan alone, then the whole read (scan
and parse, or the refusal).

    python scripts/benchmarks/bench_config_shape.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from docaudit.cli.config_file import ConfigError, read_config_file
from docaudit.cli.config_shape import toml_shape_problem
from docaudit.config import CONFIG_MAX_KEY_PARTS, CONFIG_YAML_CHARACTERS, READ_LIMITS


def cases(size: int) -> dict[str, str]:
    """Files of about ``size`` bytes: the scanner's worst tokens, and valid files of keys at the part bound."""
    key = ".".join(["a"] * (CONFIG_MAX_KEY_PARTS - 1))
    lines = [f"{key}.k{i} = {i}.5\n" for i in range(size // (len(key) + 16))]
    headers = [f"[{key}.t{i}]\nv = 1\n" for i in range(size // (len(key) + 16))]
    return {
        "dots only": "x = " + "." * (size - 8),
        "one-character parts": "a" + ".a" * (size // 2 - 2),
        "brackets": "x = [" + "[]," * (size // 3 - 4) + "]\n",
        "strings": 'x = ["' + '", "'.join(["a.b"] * (size // 7)) + '"]\n',
        "keys of 32 parts": _whole_lines("".join(lines), size),
        "headers of 32 parts": _whole_lines("".join(headers), size),
    }


def yaml_cases(size: int) -> dict[str, str]:
    """YAML files of about ``size`` bytes: a long flow list, and flow mappings nested 29 deep one after another."""
    nested = ": " + "{a: " * 29 + "1" + "}" * 29 + "\n"
    return {
        "YAML flow list": "x: [" + "1, " * (size // 3 - 4) + "1]\n",
        "YAML nested 29 deep": "".join(f"k{i}{nested}" for i in range(size // (len(nested) + 7))),
    }


def _whole_lines(text: str, size: int) -> str:
    return text[: text.rfind("\n", 0, size) + 1]


def main() -> None:
    size = READ_LIMITS["config"]
    print(f"config limit {size:,} bytes; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as folder:
        for name, text in (cases(size) | yaml_cases(CONFIG_YAML_CHARACTERS)).items():
            path = Path(folder) / ("settings.yaml" if name.startswith("YAML") else "settings.toml")
            text = text[: CONFIG_YAML_CHARACTERS if name.startswith("YAML") else size]
            path.write_text(text)
            began = time.perf_counter()
            problem = None if name.startswith("YAML") else toml_shape_problem(text)
            scan = time.perf_counter() - began
            began = time.perf_counter()
            try:
                read_config_file(path)
                outcome = "read"
            except ConfigError as e:
                outcome = "refused: " + str(e.message).split(": ", 1)[1][:50]
            whole = time.perf_counter() - began
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{name:22s} scan {scan:6.3f} s  read {whole:6.3f} s  peak RSS so far {peak:6.0f} MB  {outcome}")
            assert problem is None or outcome.startswith("refused")


if __name__ == "__main__":
    main()
