"""One seed per run: ``RunContext.seed`` is the only settings field named ``seed``, and the keys and records that
carried a settings group's seed carry the run's in the same place, so caches written before still hit and
outputs are unchanged for a given seed.

The expected values were computed with the code in which each group had its own ``seed`` field (commit 40cc5f3),
e.g. ``stats_key({"model": "m"}, QueryConfig(context=64, max_tokens=100, seed=3).key(), "ab" * 32)`` and
``sha256(json.dumps(asdict(MetaConfig(seed=3))))``."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import docaudit
from docaudit.config import SEED, ControlsConfig, DetectorConfig, MetaConfig, QueryConfig, TargetConfig, TrapConfig
from docaudit.run import RunContext

PACKAGE = Path(docaudit.__file__).parent


def _dataclasses_with_seed() -> list[str]:
    """``module:Class`` of every dataclass in the package that declares a field named ``seed``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            if not any(getattr(d, "id", getattr(d, "attr", None)) == "dataclass" for d in decorators):
                continue
            fields = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            if "seed" in fields:
                found.append(f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.name}")
    return found


def test_the_run_context_holds_the_only_seed_field():
    assert _dataclasses_with_seed() == ["docaudit/run.py:RunContext"]
    assert RunContext().seed == SEED


def _short_hash(value) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]


def test_statistics_cache_key_of_a_seed_is_the_one_written_before():
    from docaudit.query.cache import stats_key

    query = QueryConfig(context=64, max_tokens=100)
    key = stats_key({"model": "m"}, query.key(3), "ab" * 32)
    assert key == "92b62aa1b0631d5134bcb70e5b1f605ef816341bfa546ebc01c5ea007ab9b59b"
    assert stats_key({"model": "m"}, query.key(4), "ab" * 32) != key
    assert _short_hash(query.used(3)) == "f07e548daa78a4c8"  # query.used() in outputs and cards: same keys, order
    assert QueryConfig.recorded(query.used(3)) == (QueryConfig(context=64, stride=63, max_tokens=100), 3)
    assert QueryConfig.recorded({"context": 64}) == (QueryConfig(context=64), SEED)


def test_controls_cache_key_of_a_seed_is_the_one_written_before():
    from docaudit.audit.synthetic_controls import passages_key

    generator = SimpleNamespace(identity="gid", tokenizer_hash="th", config=SimpleNamespace(backend="transformers"))
    key = passages_key("ab" * 32, generator, ControlsConfig(), 3)  # with the layout after each text's first passage
    assert key == "21bd7fd84b50529bad3d96464709ed10b6b1eab04bcc9b86c460e1a8823e1e5f"
    assert passages_key("ab" * 32, generator, ControlsConfig(), 4) != key


@pytest.mark.parametrize(
    "config, expected",
    [
        (MetaConfig(), "2777a056d37a71e1"),  # a classifier card's "meta" (with the search's trees per document)
        (DetectorConfig(), "35e9a3fbb605ab14"),  # "detector" of evaluate, report and sequence outputs
        (TrapConfig(), "0fdf83a1a4d91714"),  # a trap registry's "config" (with context_tokens)
        (TargetConfig(), "7bb781fd3bb75f8d"),  # a lab target's checkpoint identity and metadata
        # "settings" of synthetic controls (--min-library 3, the interval, the generator's rows, the stretch)
        (ControlsConfig(), "d7869d8dcf9e5c9a"),
    ],
)
def test_settings_written_with_the_run_seed_are_those_written_before(config, expected):
    assert _short_hash(config.used(3)) == expected


def test_a_lab_checkpoint_of_a_seed_is_still_resumed():
    from docaudit.lab.checkpoints import identity_of

    assert _short_hash(identity_of(TargetConfig(), ["a"], ["a", "b"], None, 3)) == "4db7836c2dd684fb"
