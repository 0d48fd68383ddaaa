"""The llama.cpp backend against the transformers backend on the same float32 weights: the same tokens, windows and
statistics (up to float noise), its own cache entries, and one-line errors for what it cannot load."""

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text, make_model
from test_cli import assert_clean_error, run
from test_gguf import write_gguf

from docaudit.config import ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.io import sha256_text
from docaudit.query.backends.llamacpp import LlamaCppBackend, cpu_has_amx, repack_weights
from docaudit.query.cache import StatsCache
from docaudit.query.models import load_model
from docaudit.query.querier import Querier

pytest.importorskip("llama_cpp")

TOLERANCE = 1e-3  # nats: float32 kernels of two libraries (measured: under 1e-4)


@pytest.fixture(scope="module")
def llama_pair(tmp_path_factory, one_thread):
    """A tiny Llama as a Hugging Face folder and as a float32 GGUF file, loaded by each backend."""
    directory = tmp_path_factory.mktemp("llamacpp")
    hf = make_model(directory / "hf", "llama")
    gguf = write_gguf(hf, directory / "tiny.gguf")
    return (
        load_model(ModelConfig(model=str(hf), device="cpu")),
        load_model(ModelConfig(model=str(gguf), backend="llamacpp")),
        gguf,
    )


@pytest.mark.parametrize("context,stride", [(32, None), (24, 10)])
def test_same_statistics_as_transformers(llama_pair, context, stride):
    hf, cpp, _ = llama_pair
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=2500)
    query = QueryConfig(context=context, stride=stride)
    ours, theirs = Querier(cpp, query).stats(text), Querier(hf, query).stats(text)
    assert np.array_equal(ours.token_ids, theirs.token_ids) and ours.n_tokens > 3 * context
    for name in ("logp", "max_logp", "mu", "sigma"):
        assert np.abs(getattr(ours, name) - getattr(theirs, name)).max() < TOLERANCE, name
    assert np.abs(ours.gp_sum - theirs.gp_sum).max() < TOLERANCE * ours.n_scored
    assert np.isfinite(ours.logp).all() and (ours.logp <= ours.max_logp + 1e-5).all()


def test_own_cache_entries_same_model_identity(llama_pair, tmp_path):
    hf, cpp, _ = llama_pair
    text = corpus_text("members", corpus_ids("members", 2)[1], n_chars=800)
    cache = StatsCache(tmp_path)
    first, other = Querier(cpp, QueryConfig(context=16), cache), Querier(hf, QueryConfig(context=16), cache)
    assert cpp.identity.split("@")[1] and first.key("x") != other.key("x")
    stats = first.stats(text)
    assert cache.path(first.key(sha256_text(text))).exists()
    again = Querier(cpp, QueryConfig(context=16), cache).stats(text)
    assert np.array_equal(stats.logp, again.logp)


def test_score_command(llama_pair, tmp_path):
    hf, _, gguf = llama_pair
    doc = tmp_path / "doc.txt"
    doc.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=600))
    common = ("score", "--methods", "loss,minkpp", "--context", "16", "--device", "cpu", "--format", "json", str(doc))
    cpp = run(*common, "--model", str(gguf), "--backend", "llamacpp")
    ref = run(*common, "--model", hf.config.model)
    assert cpp.exit_code == 0 and ref.exit_code == 0, cpp.output + ref.output
    a, b = json.loads(cpp.stdout)["rows"][0], json.loads(ref.stdout)["rows"][0]
    assert abs(a["loss"] - b["loss"]) < TOLERANCE and abs(a["minkpp"] - b["minkpp"]) < 1e-2


def test_not_a_gguf_is_one_line(llama_pair):
    hf, _, _ = llama_pair
    with pytest.raises(DocauditError, match="needs a .gguf file"):
        load_model(ModelConfig(model=hf.config.model, backend="llamacpp"))
    doc = corpus_text("members", corpus_ids("members", 1)[0], n_chars=300)
    path = hf.config.model + "-doc.txt"
    open(path, "w").write(doc)
    assert_clean_error(run("score", "--model", hf.config.model, "--backend", "llamacpp", path), "needs a .gguf file")


@pytest.mark.parametrize(
    "given,owner",
    [
        (("--kv-cache", "f16"), "llamacpp"),
        (("--llama-repack", "off"), "llamacpp"),
        (("--api-timeout", "5"), "openai"),
    ],
)
def test_another_backends_setting_is_refused(llama_pair, given, owner):
    """A setting only another backend reads is refused before any weights load, not silently ignored."""
    hf, _, gguf = llama_pair
    path = hf.config.model + "-settings.txt"
    open(path, "w").write(corpus_text("members", corpus_ids("members", 1)[0], n_chars=300))
    result = run("score", "--model", hf.config.model, "--device", "cpu", *given, path)
    assert_clean_error(result, f"{given[0]} is a setting of the {owner} backend")
    with pytest.raises(DocauditError, match="--dtype is a setting of the transformers backend"):
        load_model(ModelConfig(model=str(gguf), backend="llamacpp", dtype="bfloat16"))


def test_train_then_predict_through_llamacpp(llama_pair, tmp_path):
    _, _, gguf = llama_pair
    members, nonmembers = tmp_path / "m", tmp_path / "n"
    for folder, kind in ((members, "members"), (nonmembers, "nonmembers")):
        folder.mkdir()
        for i in corpus_ids(kind, 4):
            (folder / f"{i}.txt").write_text(corpus_text(kind, i, 600))
    backend = ("--model", str(gguf), "--backend", "llamacpp", "--context", "32")
    trained = run(
        "train", "--members", members, "--nonmembers", nonmembers, "--folds", "2", "--trees", "10",
        "--norm", "max_gp", "--features", "agg", "--out", tmp_path / "clf", *backend,
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    card = json.loads((tmp_path / "clf" / "card.json").read_text())
    assert card["model_config"]["backend"] == "llamacpp" and card["model_identity"].startswith("gguf@")
    docs = sorted(members.iterdir())
    predicted = run("predict", *docs, "--classifier", tmp_path / "clf", *backend[:4], "--format", "json")
    assert predicted.exit_code == 0, predicted.output
    assert len(json.loads(predicted.stdout)["rows"]) == 4


@pytest.fixture(scope="module")
def trained_target(tmp_path_factory, one_thread):
    """A Llama target trained on a random half of real book excerpts, as a Hugging Face folder and a float32 GGUF
    file; its texts and membership labels."""
    from dataclasses import replace

    from labtarget import TINY, excerpts

    from docaudit.lab.experiment import split_members
    from docaudit.lab.target import train_target

    tmp = tmp_path_factory.mktemp("trained")
    texts = excerpts(16, 100)
    split = split_members(list(texts), seed=0)
    names = sorted(texts)
    members = [texts[n] for n in names if split[n] == 1]
    model_dir = train_target(members, list(texts.values()), tmp / "t", replace(TINY, arch="llama"))
    gguf = write_gguf(model_dir, tmp / "target.gguf")
    return model_dir, gguf, [texts[n] for n in names], np.array([split[n] for n in names])


def test_controlled_target_same_auc_through_llamacpp(trained_target):
    """A Llama target trained on a random half of real book excerpts, audited with the loss through each backend:
    the same membership AUC."""
    from sklearn.metrics import roc_auc_score as auc

    model_dir, gguf, texts, labels = trained_target
    query = QueryConfig(context=32)
    aucs = []
    for config in (ModelConfig(model=str(model_dir), device="cpu"), ModelConfig(model=str(gguf), backend="llamacpp")):
        querier = Querier(load_model(config), query)
        aucs.append(auc(labels, [float(querier.stats(t).logp.mean()) for t in texts]))
    assert aucs[0] > 0.8 and abs(aucs[0] - aucs[1]) < 1e-9


def test_float32_kv_cache_agrees_with_transformers_on_a_trained_model(trained_target):
    """On a trained target (whose probabilities are far from uniform, unlike a random model's) the llama.cpp
    backend's statistics agree with transformers' to 1e-4 nats with its default float32 K/V cache; a 16-bit
    cache (``kv_cache="f16"``, llama.cpp's own default) moves them by more, and is its own cache entry."""
    model_dir, gguf, texts, _ = trained_target
    query = QueryConfig(context=32)
    hf = Querier(load_model(ModelConfig(model=str(model_dir), device="cpu")), query)
    cpp = Querier(load_model(ModelConfig(model=str(gguf), backend="llamacpp")), query)
    half = Querier(load_model(ModelConfig(model=str(gguf), backend="llamacpp", kv_cache="f16")), query)
    worst = {"f32": 0.0, "f16": 0.0}
    for text in texts[:6]:
        theirs = hf.stats(text)
        for name, querier in (("f32", cpp), ("f16", half)):
            ours = querier.stats(text)
            assert np.array_equal(ours.token_ids, theirs.token_ids)
            for stat in ("logp", "max_logp", "mu", "sigma"):
                worst[name] = max(worst[name], float(np.abs(getattr(ours, stat) - getattr(theirs, stat)).max()))
    assert worst["f32"] < 1e-4 < worst["f16"], worst
    assert cpp.key("x") != half.key("x")


def _cpuinfo(path, flags: str):
    path.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return path


def test_repack_setting_in_the_identity_on_every_cpu():
    """Repacked and plain weights are other cache entries, whatever this machine's CPU would choose for `auto`."""
    identities = {}
    for repack in (False, True):
        backend = LlamaCppBackend.__new__(LlamaCppBackend)
        backend.kv_cache, backend.repack = "f16", repack
        identities[repack] = backend.identity()
    assert identities[False] != identities[True] and identities[False]["repack"] is False


def test_repacked_weights_off_where_the_cpu_has_amx(tmp_path):
    amx = _cpuinfo(tmp_path / "amx", "fpu sse avx2 avx512f amx_bf16 amx_tile amx_int8")
    plain = _cpuinfo(tmp_path / "plain", "fpu sse avx2 avx512f avx512_vnni")
    assert cpu_has_amx(amx) and not cpu_has_amx(plain) and not cpu_has_amx(tmp_path / "absent")
    assert not repack_weights("auto", amx) and repack_weights("auto", plain)
    assert repack_weights("on", amx) and not repack_weights("off", plain)


@pytest.mark.parametrize("repack", [False, True])
def test_llama_cpp_loads_the_weights_as_asked(llama_pair, repack):
    """The setting reaches the parameters llama.cpp loads the model with (llama-cpp-python has no argument for
    them), and the defaults are left as they were."""
    _, cpp, gguf = llama_pair
    import llama_cpp

    model = replace(cpp.model, repack=repack)
    llm = model.open(33)
    assert llm.model_params.use_extra_bufts is repack
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True
    llm.close()


def test_repack_off_same_statistics_own_cache_key(llama_pair, tmp_path):
    _, cpp, gguf = llama_pair
    plain = load_model(ModelConfig(model=str(gguf), backend="llamacpp", llama_repack="off"))
    assert plain.model.repack is False
    text = corpus_text("members", corpus_ids("members", 3)[2], n_chars=900)
    query = QueryConfig(context=24)
    ours, theirs = Querier(plain, query), Querier(cpp, query)
    # another layout, another cache entry: the fixture's `auto` repacks except on a CPU with AMX, where it is `off` too
    assert (ours.key("x") != theirs.key("x")) is cpp.model.repack
    a, b = ours.stats(text), theirs.stats(text)
    assert np.abs(a.logp - b.logp).max() < TOLERANCE  # float32 weights: no repacked kernel either way


def _book_prompts(lm, n: int, length: int) -> list[list[int]]:
    ids = list(lm.tokenizer(corpus_text("members", corpus_ids("members", 1)[0]), add_special_tokens=False).input_ids)
    return [ids[k * 37 : k * 37 + length] for k in range(n)]


def test_rows_side_by_side_sample_what_each_prompt_samples_alone(llama_pair, monkeypatch):
    """A prompt's continuations through llama.cpp are the same alone, beside other prompts in one decoding loop,
    and split over several loops: each row draws from its own uniforms, whatever rows share its decode calls."""
    from docaudit.query.backends import llama_rows
    from docaudit.query.generate import continuations

    hf, cpp, _ = llama_pair
    prompts = _book_prompts(hf, 5, 14)
    streams = [(7, 100 + i) for i in range(5)]
    together = continuations(cpp, prompts, 3, 10, {"temperature": 1.0, "batch_size": 5, "streams": streams})
    alone = [
        continuations(cpp, [p], 3, 10, {"temperature": 1.0, "batch_size": 1, "streams": [s]})[0]
        for p, s in zip(prompts, streams)
    ]
    monkeypatch.setattr(llama_rows, "ROWS", 4)  # one prompt (3 rows) per loop
    split = continuations(cpp, prompts, 3, 10, {"temperature": 1.0, "batch_size": 5, "streams": streams})
    assert together == alone == split
    assert continuations(hf, prompts, 3, 10, {"temperature": 1.0, "batch_size": 2, "streams": streams}) == together


def test_books_are_decoded_apart_through_llama_cpp(llama_pair, monkeypatch):
    """On quantized weights llama.cpp's logits depend on the shape of the batch a row is decoded in, so through
    llama.cpp a decoding loop never holds two books' prompts and each book's loops are cut from its own first
    prompt: its suffixes are those it gets alone, whatever books run beside it. transformers shares loops."""
    from docaudit.query.backends.llamacpp import LlamaCppBackend
    from docaudit.query.generate import continuations, loops

    keys = [(7, 0), (7, 1), (7, 2), (9, 0), (9, 1), (5, 0)]
    assert loops(keys, 2, apart=True) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    assert loops(keys, 2, apart=False) == [(0, 2), (2, 4), (4, 6)]
    assert loops(keys[3:], 2, apart=True) == [(0, 2), (2, 3)]  # book 9 alone: the same loops as beside book 7
    hf, cpp, _ = llama_pair
    seen = []
    sample = LlamaCppBackend.sample

    def spy(self, batch, *args):
        seen.append(len(batch))
        return sample(self, batch, *args)

    monkeypatch.setattr(LlamaCppBackend, "sample", spy)
    prompts = _book_prompts(hf, 6, 14)
    options = {"temperature": 1.0, "batch_size": 2, "streams": keys}
    assert continuations(cpp, prompts, 2, 4, options) is not None and seen == [2, 1, 2, 1]


def test_suffixes_scored_side_by_side_match_whole_windows(llama_pair, monkeypatch):
    """Suffix log-probabilities from the logits of the suffix's positions, several sequences per decode call (and
    one per call), against each sequence scored as one whole window (``Backend.suffix_logprob``, every position's
    statistics) and against transformers."""
    from docaudit.query.backends import llama_rows
    from docaudit.query.backends.base import Backend
    from docaudit.query.conditional import suffix_logprob
    from docaudit.query.models import opened_backend

    hf, cpp, _ = llama_pair
    bos = hf.tokenizer.bos_token_id
    sequences = [([bos, *p], n) for p, n in zip(_book_prompts(hf, 6, 20), (1, 5, 19, 8, 12, 3))]
    sequences.append(([bos, *_book_prompts(hf, 1, 7)[0]], 6))  # a shorter one among them
    ours = suffix_logprob(cpp, sequences)
    monkeypatch.setattr(llama_rows, "SCORED_TOKENS", 1)  # one sequence per call
    one_by_one = suffix_logprob(cpp, sequences)
    windows = Backend.suffix_logprob(opened_backend(cpp, 32), sequences, bos)
    reference = suffix_logprob(hf, sequences)
    assert np.isfinite(ours).all() and (ours < 0).all()
    np.testing.assert_allclose(ours, one_by_one, atol=TOLERANCE)
    np.testing.assert_allclose(ours, windows, atol=TOLERANCE)
    np.testing.assert_allclose(ours, reference, atol=TOLERANCE * 20)
    assert np.isnan(suffix_logprob(cpp, [([bos, 5, 6], 2), ([bos, 5], 0)])).all()  # nothing before it, nothing asked


def test_llama_cpp_log_lines_go_to_the_debug_log(llama_pair, capfd, caplog):
    """llama.cpp's own lines at context creation (the K/V cache's) reach the debug log, not the terminal."""
    import logging

    from docaudit.query.progress import ENGINE_LOG

    _, cpp, _ = llama_pair
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG, logger=ENGINE_LOG):
        LlamaCppBackend(cpp.model, 16)._side_by_side(64, 4)
    out, err = capfd.readouterr()
    assert out == err == ""
    assert any(r.name == ENGINE_LOG for r in caplog.records)


def test_engine_threads_follow_affinity_and_quota(tmp_path, monkeypatch):
    import os

    from docaudit.query import cpus

    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert cpus.available_cpus(tmp_path / "absent") == 4
    quota.write_text("max 100000\n")
    assert cpus.available_cpus(quota) == 4
    quota.write_text("150000 100000\n")  # one and a half CPUs: two threads
    assert cpus.available_cpus(quota) == 2
    assert cpus.engine_threads(8, quota, load=0.0) == 2 and cpus.engine_threads(1, quota, load=0.0) == 1
    quota.write_text("garbage")
    assert cpus.available_cpus(quota) == 4 and cpus.engine_threads(None, quota, load=0.2) == 4
    # other work's load leaves fewer idle CPUs: one thread at least
    assert [cpus.engine_threads(None, quota, load=x) for x in (1.2, 2.6, 3.9, 12.0)] == [3, 1, 1, 1]
