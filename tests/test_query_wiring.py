"""How the query layer is put together: backends found through their registry (the loader imports none of them), a
backend added by one registration, a querier's pool and a cache entry's model passed explicitly, not held in
module state."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from docaudit.config import ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.query.backends import BACKENDS
from docaudit.query.backends.base import FULL, register_backend, require
from docaudit.query.backends.transformers import TransformersBackend, load_transformers
from docaudit.query.cache import StatsCache, entry_model
from docaudit.query.models import load_model
from docaudit.query.querier import Querier, open_querier
from docaudit.run import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
QUERY = QueryConfig(context=32, gp=False)
TEXTS = [("The quick brown fox jumps over the lazy dog. " * 4, None), ("A second text, not the first one. " * 5, None)]


def test_the_registered_backends_and_what_they_provide():
    assert list(BACKENDS) == ["transformers", "llamacpp", "openai"]  # the order of --backend's choices
    assert {name: spec.provides for name, spec in BACKENDS.items()} == {
        "transformers": FULL,
        "llamacpp": FULL,
        "openai": frozenset({"logp", "max_logp"}),
    }


def test_each_backend_option_is_a_model_field_of_that_backend_alone():
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    claimed = [option for spec in BACKENDS.values() for option in spec.options]
    assert set(claimed) <= fields and len(claimed) == len(set(claimed))
    assert fields - set(claimed) == {"model", "backend", "device"}  # what every backend reads


def test_the_loader_and_the_registry_import_no_backend():
    spec = importlib.util.spec_from_file_location(
        "check_architecture", ROOT / "scripts" / "checks" / "check_architecture.py"
    )
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    graph = checker.import_graph(ROOT / "docaudit")
    backends = {f"docaudit.query.backends.{name}" for name in BACKENDS}
    for module in ("docaudit.query.models", "docaudit.query.querier", "docaudit.query.backends.base"):
        assert not backends & set(graph[module]), module
    for backend in backends:  # and no backend imports the loader or the querier
        assert not {"docaudit.query.models", "docaudit.query.querier"} & set(graph[backend]), backend


def test_an_unknown_backend_is_a_one_line_error(tiny_gpt2):
    with pytest.raises(DocauditError, match=r"^unknown backend 'nope' \(choose from transformers, llamacpp, openai\)$"):
        load_model(ModelConfig(model=str(tiny_gpt2), backend="nope"))
    with pytest.raises(ValueError, match="registered twice"):
        register_backend("transformers", FULL, load_transformers, BACKENDS["transformers"].open)


class ProbeBackend(TransformersBackend):
    name = "probe"


def test_a_backend_added_by_one_registration(tiny_gpt2):
    """A backend providing only log p: loaded, opened and checked through the registry like the others."""

    def load(config, expected_identity=None):
        lm = load_transformers(dataclasses.replace(config, backend="transformers"), expected_identity)
        return dataclasses.replace(lm, config=dataclasses.replace(lm.config, backend="probe"))

    register_backend("probe", ("logp",), load, lambda lm, query: ProbeBackend(lm.model, lm.vocab_size, lm.device))
    try:
        lm = load_model(ModelConfig(model=str(tiny_gpt2), device="cpu", backend="probe"))
        querier = open_querier(lm, QUERY, cache=False)
        assert querier.backend.name == "probe" and querier.backend.provides == {"logp"}
        reference = open_querier(ModelConfig(model=str(tiny_gpt2), device="cpu"), QUERY, cache=False)
        assert np.array_equal(querier.stats(*TEXTS[0]).logp, reference.stats(*TEXTS[0]).logp)
        with pytest.raises(DocauditError, match="the probe backend does not provide.*--backend transformers or"):
            require("probe", "method 'minkpp'", ["moments"])
        with pytest.raises(DocauditError, match="cannot compute GP sums"):
            Querier(lm, QueryConfig(context=32, gp=True))
    finally:
        del BACKENDS["probe"]


class RecordingPool:
    """A pool that answers from a querier of its own, recording what it was asked."""

    def __init__(self, local: Querier):
        self.local, self.calls = local, []

    def stats_many(self, querier, texts, total, desc, progress, names=None, skip_nonfinite=False):
        texts = list(texts)
        self.calls.append(("stats_many", len(texts)))
        return self.local.stats_many(texts, progress=False, names=names, skip_nonfinite=skip_nonfinite)

    def compute(self, querier, texts, keep, desc, progress):
        texts = list(texts)
        self.calls.append(("compute", len(texts), keep))
        for text, sha in texts:
            querier.store(querier.key(sha), self.local.stats(text, sha))
        return {}


def test_only_the_querier_given_a_pool_sends_its_queries_there(tiny_gpt2, tmp_path):
    lm = load_model(ModelConfig(model=str(tiny_gpt2), device="cpu"))
    pool = RecordingPool(Querier(lm, QUERY))
    texts = [(text, f"{i:064x}") for i, (text, _) in enumerate(TEXTS)]
    pooled, local = Querier(lm, QUERY, StatsCache(tmp_path / "a"), pool), Querier(lm, QUERY, StatsCache(tmp_path / "b"))
    expected = [s.logp for s in local.stats_many(texts, progress=False)]
    assert pool.calls == []  # a querier without the pool never reaches it, whatever else exists in the process
    assert [s.logp.tolist() for s in pooled.stats_many(texts, progress=False)] == [e.tolist() for e in expected]
    assert pool.calls == [("stats_many", 2)]
    local.prefetch(texts, progress=False)  # without a pool: nothing
    pooled.prefetch(texts, progress=False)
    assert pool.calls[-1] == ("compute", 2, False)
    assert all(pooled.cache.get(pooled.key(sha)) is not None for _, sha in texts)
    pooled.cache = None
    pooled.prefetch(texts, progress=False)  # no cache to fill: nothing
    assert len(pool.calls) == 2


def test_a_cache_entry_records_the_model_it_was_given(tiny_gpt2, tmp_path):
    lm = load_model(ModelConfig(model=str(tiny_gpt2), device="cpu"))
    querier = Querier(lm, QUERY, StatsCache(tmp_path))
    stats = querier.stats(*TEXTS[0])
    (entry,) = querier.cache.entries()
    assert entry_model(entry) == lm.identity
    bare = StatsCache(tmp_path / "bare")
    bare.put("f" * 64, stats)
    bare.put("e" * 64, stats, "some-model@1234")
    assert sorted(entry_model(p) for p in bare.entries()) == ["some-model@1234", "unrecorded"]
    # a key computed for one model and stored by a querier of another records the storing querier's model
    other = Querier(dataclasses.replace(lm, identity="local@other"), QUERY, StatsCache(tmp_path / "other"))
    querier.key("d" * 64)
    other.store(querier.key("d" * 64), stats)
    assert [entry_model(p) for p in other.cache.entries()] == ["local@other"]


def test_scale_out_gives_the_pool_and_changes_no_other_querier(tiny_gpt2):
    """The pool is what ``scale_out`` returns, for the caller to pass on; a querier opened inside the block without
    it queries in this process (nothing is started until a query reaches the pool)."""
    from docaudit.config import RayConfig
    from docaudit.methods.detectors.detector import build_detector
    from docaudit.query.distributed import RayPool, scale_out

    lm = load_model(ModelConfig(model=str(tiny_gpt2), device="cpu"))
    with scale_out(None) as none:
        assert none is None
    with scale_out(RayConfig(workers=1)) as pool:
        assert isinstance(pool, RayPool) and pool.actors == []
        assert open_querier(lm, QUERY).pool is None
        assert open_querier(lm, QUERY, pool=pool).pool is pool
        detector = build_detector(lm, QUERY, ["loss", "ref"], models=ModelSpec(ref_model=lm)).on_pool(pool)
        assert detector.target.pool is pool and detector.ref.pool is pool
        assert detector.on_pool(None).target.pool is None and detector.ref.pool is None
