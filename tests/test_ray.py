"""Querying on a local Ray instance of two CPU workers: the same TokenStats and cache keys as one process, a worker
killed mid-run, and a rerun after the driver was interrupted."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text

from docaudit.config import ModelConfig, QueryConfig, RayConfig
from docaudit.query.cache import StatsCache
from docaudit.query.distributed import RayPool
from docaudit.query.querier import open_querier

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("token_ids", "logp", "max_logp", "mu", "sigma", "gp_sum")
QUERY = QueryConfig(context=32)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance of 2 CPUs (no dashboard, no usage report) and a pool of 2 workers, one document per task,
    shared by the module's tests."""
    assert not ray.is_initialized()
    usage = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    env = {"PYTHONPATH": str(ROOT), "DOCAUDIT_CACHE": str(tmp_path_factory.mktemp("workers")), "OMP_NUM_THREADS": "1"}
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    pool = RayPool(RayConfig(workers=2, task_chars=1))
    try:
        yield pool
    finally:
        pool.close()
        ray.shutdown()
        if usage is None:
            del os.environ["RAY_USAGE_STATS_ENABLED"]
        else:
            os.environ["RAY_USAGE_STATS_ENABLED"] = usage


@pytest.fixture(scope="module")
def texts():
    """20 book passages of 1,000 to 14,300 characters."""
    ids = [(group, b) for group in ("members", "nonmembers") for b in corpus_ids(group, 10)]
    return [(corpus_text(group, b, n_chars=1000 + 700 * i), None) for i, (group, b) in enumerate(ids)]


@pytest.fixture(scope="module")
def reference(tiny_gpt2, texts, tmp_path_factory, one_thread):
    """The single-process TokenStats and the cache entries they were written to."""
    cache = tmp_path_factory.mktemp("reference-cache")
    querier = _querier(tiny_gpt2)
    querier.cache = StatsCache(cache)
    return querier.stats_many(texts, progress=False), _entries(cache)


def _querier(model: Path, pool: RayPool | None = None):
    return open_querier(ModelConfig(model=str(model), device="cpu"), QUERY, pool=pool)


def _entries(cache: Path) -> list[str]:
    """Names of every file under the cache's stats folder (temporary files of a half-written entry included)."""
    return sorted(p.name for p in (cache / "stats").rglob("*") if p.is_file())


def _same(stats, reference) -> None:
    assert len(stats) == len(reference)
    for a, b in zip(stats, reference):
        for name in FIELDS:
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.slow
def test_same_stats_and_cache_keys_as_one_process(cluster, tiny_gpt2, texts, reference, tmp_path):
    querier = _querier(tiny_gpt2, cluster)
    stats = querier.stats_many(texts, progress=False)
    again = querier.stats_many(texts, progress=False)
    _same(stats, reference[0])
    _same(again, reference[0])
    assert _entries(tmp_path / "cache") == reference[1]
    first, second = cluster.summaries[-2:]
    assert (first.computed, first.cached, first.failures) == (len(texts), 0, 0)
    assert (second.computed, second.cached) == (0, len(texts))


class CacheWithEvent(StatsCache):
    """The cache, running ``action`` on the driver just before it writes its ``n``-th entry: a fault at a known point
    of the run, when the other documents are queued or in flight on the workers."""

    def __init__(self, root: Path, n: int, action):
        super().__init__(root)
        self.n, self.action, self.written = n, action, 0

    def put(self, key, stats, model=None):
        self.written += 1
        if self.written == self.n:
            self.action()
        super().put(key, stats, model)


def _interrupt():
    raise KeyboardInterrupt


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_worker_killed_mid_run(cluster, tiny_gpt2, texts, reference, tmp_path, how):
    """An actor killed through Ray, or its process killed as the out-of-memory killer would."""
    querier = _querier(tiny_gpt2, cluster)
    querier.stats_many(texts[:1], progress=False)  # workers started and the model loaded
    victim = cluster.actors[cluster.state.index("ready")]
    if how == "ray.kill":
        kill = partial(ray.kill, victim, no_restart=False)
    else:
        kill = partial(os.kill, ray.get(victim.ping.remote()), signal.SIGKILL)
    querier.cache = CacheWithEvent(tmp_path / "cache", 3, kill)
    stats = querier.stats_many(texts, progress=False)
    summary = cluster.summaries[-1]
    assert summary.failures >= 1 and summary.resent >= 1, "the worker was not killed while it held documents"
    assert summary.computed == len(texts) - 1
    _same(stats, reference[0])
    assert _entries(tmp_path / "cache") == reference[1]  # each entry once, none half-written


@pytest.mark.slow
def test_rerun_after_interrupted_driver_skips_finished_documents(cluster, tiny_gpt2, texts, reference, tmp_path):
    querier = _querier(tiny_gpt2, cluster)
    cache = tmp_path / "cache"
    querier.stats_many(texts[:1], progress=False)
    querier.cache = CacheWithEvent(cache, 5, _interrupt)  # Ctrl-C after 4 more documents
    with pytest.raises(KeyboardInterrupt):
        querier.stats_many(texts, progress=False)
    finished = _entries(cache)
    assert len(finished) == 5 and set(finished) <= set(reference[1])  # whole entries only
    querier.cache = StatsCache(cache)
    stats = querier.stats_many(texts, progress=False)
    summary = cluster.summaries[-1]
    assert (summary.computed, summary.cached) == (len(texts) - 5, 5)
    _same(stats, reference[0])
    assert _entries(cache) == reference[1]


@pytest.mark.slow
def test_a_document_too_short_is_the_same_error_as_in_one_process(cluster, tiny_gpt2, texts):
    from docaudit.errors import DocauditError

    with pytest.raises(DocauditError, match="needs at least 2 tokens to be queried, this one has 1"):
        _querier(tiny_gpt2, cluster).stats_many([texts[0], ("a", None)], progress=False)


@pytest.mark.slow
def test_score_on_ray_gives_the_same_scores_and_cache(cluster, tiny_gpt2, texts, tmp_path, monkeypatch, one_thread):
    from click.testing import CliRunner

    from docaudit.cli import main

    files = []
    for i, (text, _) in enumerate(texts[:4]):
        files.append(tmp_path / f"doc{i}.txt")
        files[-1].write_text(text, encoding="utf-8")
    args = ["score", *map(str, files), "--model", str(tiny_gpt2), "--device", "cpu", "--context", "32"]
    args += ["--methods", "loss,lowercase,pac", "--pac-copies", "3"]
    outputs, entries = [], []
    for name, extra in (("plain", []), ("ray", ["--ray-workers", "2"])):
        monkeypatch.setenv("DOCAUDIT_CACHE", str(tmp_path / name))
        cluster.close()  # the command starts its own two workers on the instance's two CPUs
        result = CliRunner().invoke(main, args + extra)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
        entries.append(_entries(tmp_path / name))
    assert outputs[0] == outputs[1]
    assert entries[0] == entries[1] and len(entries[0]) == 4 * (1 + 1 + 3)  # the same keys with Ray on and off
    # the documents, then their lowercased texts and PAC's copies: every pass on the workers
    for n in (4, 4, 12):
        assert f"ray: {n} documents queried on 2 workers, 0 from the cache" in result.stderr


def test_ray_options_are_checked_before_anything_starts(tmp_path):
    from click.testing import CliRunner

    from docaudit.cli import main

    (tmp_path / "doc.txt").write_text("A document that exists, so that only the option is wrong.")
    result = CliRunner().invoke(main, ["score", str(tmp_path / "doc.txt"), "--ray-workers", "0"])
    assert result.exit_code == 3 and "error: --ray-workers 0 is out of range" in result.stderr


@pytest.mark.slow
def test_documents_read_through_joblibs_ray_backend_on_a_cluster(cluster, texts, tmp_path):
    """With an address, joblib's ``ray`` backend is the default: many files are read and cleaned on the cluster,
    into the same documents in the same order."""
    from docaudit.config import READ_JOBS_MIN_FILES
    from docaudit.corpus.documents import load_documents

    for i, (text, _) in enumerate(texts[:READ_JOBS_MIN_FILES]):
        (tmp_path / f"doc{i:02}.txt").write_text(text[:3000], encoding="utf-8")
    local = load_documents([tmp_path], progress=False)
    cluster.close()  # free the CPUs for joblib's tasks
    with RayPool(RayConfig(address="auto")).joblib_backend():
        import joblib

        assert type(joblib.parallel.get_active_backend()[0]).__name__ == "RayBackend"
        on_ray = load_documents([tmp_path], progress=False)
    assert [(d.path, d.sha256) for d in on_ray] == [(d.path, d.sha256) for d in local]


@pytest.fixture(scope="module")
def poisoned_model(tiny_gpt2, tmp_path_factory):
    """The tiny GPT-2 with the input embeddings of the tokens of "§¤" set to NaN (the output layer untied, so it
    stays finite): a text holding them gets non-finite statistics, any other text is scored as before."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2)
    model = AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    with torch.no_grad():
        model.get_input_embeddings().weight[tokenizer("§¤")["input_ids"]] = float("nan")
    out = tmp_path_factory.mktemp("poisoned")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.slow
def test_a_document_with_non_finite_statistics_is_skipped_on_ray_as_in_one_process(
    cluster, poisoned_model, texts, tmp_path, one_thread
):
    from docaudit.errors import DocauditError

    batch = [texts[0], (texts[1][0] + " §¤§¤ " + texts[1][0], None), texts[2]]
    results = {}
    for name, pool in (("local", None), ("ray", cluster)):
        querier = _querier(poisoned_model, pool)
        querier.cache = StatsCache(tmp_path / name)
        results[name] = querier.stats_many(batch, progress=False, skip_nonfinite=True)
        assert isinstance(results[name][1], str) and "non-finite statistics" in results[name][1]
        assert len(_entries(tmp_path / name)) == 2  # nothing non-finite cached
        with pytest.raises(DocauditError, match="^second: the model gave non-finite statistics"):
            querier.stats_many(batch, progress=False, names=["first", "second", "third"])
    assert results["ray"][1] == results["local"][1]
    _same([results["ray"][i] for i in (0, 2)], [results["local"][i] for i in (0, 2)])
