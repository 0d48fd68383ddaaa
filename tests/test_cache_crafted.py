"""Crafted entries in the cache folder cannot hang a run or change a result: a FIFO where an entry or a memo should
be is a miss, an entry with impossible values (log p above 0, token ids outside the vocabulary, more tokens than the
query's excerpt) is a miss, recomputed; ``cache info`` piped into ``head`` stops quietly."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text

import docaudit
from docaudit.config import ModelConfig, QueryConfig
from docaudit.io import sha256_text
from docaudit.query.cache import StatsCache, cache_root
from docaudit.query.models import load_model
from docaudit.query.querier import Querier
from docaudit.query.sources import resolve_source

HANG_GUARD = 60  # seconds before a call is taken for hung


def guarded(call):
    """``call()``'s result, run in a daemon thread so that a call that blocks fails the test instead of hanging it;
    returns ``(finished, result)``."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=call()), daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    return not thread.is_alive(), box.get("result")


def release(fifo: Path) -> None:
    """Let a reader blocked on ``fifo`` go (a writer opens and closes it), so no thread stays stuck."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waiting
        pass


@pytest.fixture(scope="module")
def gpt2_model(tiny_gpt2):
    return load_model(ModelConfig(model=str(tiny_gpt2)))


TEXT = corpus_text("members", corpus_ids("members", 1)[0], n_chars=300)


def test_a_fifo_in_place_of_a_statistics_entry_is_a_miss_not_a_hang(gpt2_model):
    cache = StatsCache()
    querier = Querier(gpt2_model, QueryConfig(context=16), cache)
    good = querier.stats(TEXT)
    (path,) = cache.entries()
    path.unlink()
    os.mkfifo(path)
    try:
        finished, again = guarded(lambda: querier.stats(TEXT))
    finally:
        release(path)
    assert finished, "reading a FIFO in the cache blocked"
    assert np.array_equal(again.logp, good.logp)


def test_a_fifo_in_place_of_a_weights_memo_is_a_miss_not_a_hang(tiny_gpt2):
    identity = resolve_source(str(tiny_gpt2)).identity
    (memo,) = (cache_root() / "weights-hash").glob("*.txt")
    memo.unlink()
    os.mkfifo(memo)
    try:
        finished, source = guarded(lambda: resolve_source(str(tiny_gpt2)))
    finally:
        release(memo)
    assert finished, "reading a FIFO in place of a memo blocked"
    assert source.identity == identity


def forge(path: Path, **changes) -> None:
    arrays = dict(np.load(path))
    for name, change in changes.items():
        arrays[name] = change(arrays[name].copy())
    with path.open("wb") as f:
        np.savez(f, **arrays)


def at(index, value):
    def change(array):
        array[index] = value
        return array

    return change


@pytest.mark.parametrize(
    "changes",
    [
        {"logp": at(3, 5.0)},
        {"max_logp": at(0, 0.5)},
        {"mu": at(1, 2.0)},
        {"sigma": at(2, -1.0)},
        {"token_ids": at(4, -3)},
        {"token_ids": at(4, 10**6)},
        {"gp_sum": at(0, -2.0)},
        {"sigma": at(2, 1e30)},
        {"logp": at(3, -0.01), "max_logp": at(3, -5.0)},
        {"mu": at(1, -1e6)},
    ],
    ids=[
        "logp>0",
        "max_logp>0",
        "mu>0",
        "sigma<0",
        "negative id",
        "id beyond the vocabulary",
        "gp_sum<0",
        "sigma=1e30",
        "max_logp<logp",
        "mu<-log V",
    ],
)
def test_a_cache_entry_with_impossible_values_is_a_miss_and_recomputed(gpt2_model, changes):
    """Before, such an entry was used: another membership score with status 0, or (a token id beyond the
    vocabulary) an internal error, status 70."""
    cache = StatsCache()
    querier = Querier(gpt2_model, QueryConfig(context=16, gp=True), cache)
    good = querier.stats(TEXT)
    (path,) = cache.entries()
    forge(path, **changes)
    again = querier.stats(TEXT)
    for name in ("token_ids", "logp", "max_logp", "mu", "sigma", "gp_sum"):
        assert np.array_equal(getattr(again, name), getattr(good, name)), name
    assert np.array_equal(np.load(path)["token_ids"], good.token_ids)  # replaced by the recomputed entry


def test_a_cache_entry_longer_than_the_querys_excerpt_is_a_miss(gpt2_model):
    cache = StatsCache()
    whole = Querier(gpt2_model, QueryConfig(context=16), cache).stats(TEXT)
    excerpt = Querier(gpt2_model, QueryConfig(context=16, max_tokens=20), cache)
    key = excerpt.key(sha256_text(TEXT))
    cache.put(key, whole)  # an entry of the whole text where a 20-token excerpt belongs
    assert excerpt.stats(TEXT).n_tokens == 20


@pytest.mark.slow
def test_cache_info_into_a_closed_pipe_stops_quietly(tmp_path):
    """``docaudit cache info | head -1`` used to end in an internal error (status 70) once head had left."""
    env = {**os.environ, "PYTHONPATH": str(Path(docaudit.__file__).parents[1]), "DOCAUDIT_CACHE": str(tmp_path)}
    for i in range(300):
        (tmp_path / f"someone-elses-{i}.txt").write_text("x")
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first line
    result = subprocess.run(
        [sys.executable, "-m", "docaudit", "cache", "info", "--format", "json"],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=env,
    )
    os.close(writer)
    assert result.returncode == 141, (result.returncode, result.stderr)
    assert result.stderr == ""
