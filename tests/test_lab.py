import dataclasses
import json

import numpy as np
import pytest
import torch
from labtarget import TINY, excerpts, mean_logp, single_thread, tiny_target
from transformers import AutoModelForCausalLM, AutoTokenizer

from docaudit.config import TargetConfig
from docaudit.errors import DocauditError
from docaudit.lab.experiment import member_nonmember_loss, split_members
from docaudit.lab.target import build_model, read_target_metadata, train_target
from docaudit.lab.tokenizer import train_tokenizer

# a very small configuration for the checkpoint tests
MICRO = TargetConfig(layers=1, width=32, heads=2, positions=32, vocab_size=400, epochs=4, batch_size=4)


@pytest.fixture(scope="module")
def micro_texts():
    texts = list(excerpts(6, n_words=60).values())
    return texts[:3], texts


def _weights(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir).state_dict()


def _same_weights(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_split_members_seeded_balanced_order_free():
    ids = [str(i) for i in range(101)]
    a = split_members(ids, seed=1)
    assert a == split_members(list(reversed(ids)), seed=1)
    assert sum(a.values()) == 50 and set(a) == set(ids) and set(a.values()) == {0, 1}
    assert a != split_members(ids, seed=2)
    assert sum(split_members(ids, seed=0, member_fraction=0.25).values()) == 25
    with pytest.raises(DocauditError):
        split_members(["a", "a"], seed=0)
    with pytest.raises(DocauditError):
        split_members(ids, seed=0, member_fraction=1.0)


def test_tokenizer_adds_bos_and_round_trips():
    texts = list(excerpts(4, n_words=80).values())
    tok = train_tokenizer(texts, 400)
    ids = tok(texts[0]).input_ids
    assert ids[0] == tok.bos_token_id == tok.eos_token_id == 0 and len(tok) == 400
    assert tok.decode(ids, skip_special_tokens=True) == texts[0]
    assert tok.decode(tok("naïve “quotes” — 日本").input_ids[1:]) == "naïve “quotes” — 日本"


def test_build_model_llama_and_gpt2_seeded():
    for arch in ("gpt2", "llama"):
        cfg = dataclasses.replace(MICRO, arch=arch)
        a, b = build_model(cfg, 400, 3), build_model(cfg, 400, 3)
        assert a.config.vocab_size == 400
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(DocauditError):
        TargetConfig(arch="bert")
    with pytest.raises(DocauditError):
        TargetConfig(width=30, heads=4)


def test_tiny_target_loads_and_memorizes():
    model_dir, members, nonmembers = tiny_target()
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.n_positions == TINY.positions and len(tok) == TINY.vocab_size
    meta = read_target_metadata(model_dir)
    assert meta["epochs_done"] == TINY.epochs and meta["history"][-1]["loss"] < meta["history"][0]["loss"]
    with single_thread():
        res = member_nonmember_loss(model_dir, members, nonmembers, cache=False)
        # the querier's numbers against a slow reference: one plain forward pass of [BOS] + window per window of
        # the longest context the model takes (its positions less the BOS)
        for group, texts in (("member", members), ("nonmember", nonmembers)):
            expected = -mean_logp(model, tok, texts, TINY.positions - 1, None, bos_per_window=True)
            n_scored = [len(tok(t, add_special_tokens=False).input_ids) - 1 for t in texts]
            assert np.allclose(res[f"{group}_doc_losses"], expected, rtol=0, atol=1e-4)
            assert res[f"{group}_tokens"] == sum(n_scored)
            assert res[f"{group}_loss"] == pytest.approx(np.average(expected, weights=n_scored), abs=1e-4)
    # members are memorized: a clear gap in per-token loss (about 1.4 nats in this setting)
    assert res["gap"] > 0.7, res
    assert max(res["member_doc_losses"]) < min(res["nonmember_doc_losses"])


def test_done_model_is_returned_without_training(tmp_path, micro_texts):
    members, pool = micro_texts
    cfg = dataclasses.replace(MICRO, epochs=1)
    with single_thread():
        out = train_target(members, pool, tmp_path, cfg)
        stamp = (out / "model.safetensors").stat().st_mtime_ns
        assert train_target(members, pool, tmp_path, cfg) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert len(read_target_metadata(out)["segments"]) == 1
    with pytest.raises(DocauditError, match="different training run"):
        train_target(members, pool, tmp_path, dataclasses.replace(cfg, width=64))
    with pytest.raises(DocauditError, match="members_sha256"):
        train_target(members[:2], pool, tmp_path, cfg)


def test_interrupted_run_resumes_and_matches_uninterrupted(tmp_path, micro_texts):
    members, pool = micro_texts

    def stop_after_first(epoch, loss):
        if epoch == 1:
            raise KeyboardInterrupt

    with single_thread():
        with pytest.raises(KeyboardInterrupt):
            train_target(members, pool, tmp_path / "a", MICRO, on_epoch_end=stop_after_first)
        state = json.loads((tmp_path / "a" / "checkpoint" / "state.json").read_text())
        assert state["epochs_done"] == 1 and not (tmp_path / "a" / "model").exists()
        epochs_seen = []
        resumed = train_target(members, pool, tmp_path / "a", MICRO, on_epoch_end=lambda e, _: epochs_seen.append(e))
        straight = train_target(members, pool, tmp_path / "b", MICRO)
    assert epochs_seen == [2, 3, 4]
    assert [(s["start_epoch"], s["end_epoch"]) for s in read_target_metadata(resumed)["segments"]] == [(0, 1), (1, 4)]
    assert _same_weights(resumed, straight)
    assert read_target_metadata(resumed)["history"] == read_target_metadata(straight)["history"]


def test_a_run_killed_while_replacing_its_checkpoint_resumes_from_the_copy_aside(tmp_path, micro_texts, monkeypatch):
    """Killed between moving the old checkpoint aside and moving the new one in: the next run resumes from the
    copy kept aside, trains to the same weights as an uninterrupted run, and leaves no staging folders behind."""
    import os

    members, pool = micro_texts
    real_replace = os.replace

    def killed_between_renames(src, dst):
        if os.path.basename(src).startswith("checkpoint.tmp-"):  # the earlier checkpoint is already moved aside
            raise KeyboardInterrupt
        real_replace(src, dst)

    def stop_after_first(epoch, loss):
        if epoch == 1:
            raise KeyboardInterrupt

    with single_thread():
        with pytest.raises(KeyboardInterrupt):
            train_target(members, pool, tmp_path / "a", MICRO, on_epoch_end=stop_after_first)
        monkeypatch.setattr(os, "replace", killed_between_renames)
        with pytest.raises(KeyboardInterrupt):
            train_target(members, pool, tmp_path / "a", MICRO)
        monkeypatch.setattr(os, "replace", real_replace)
        assert not (tmp_path / "a" / "checkpoint").exists()
        assert json.loads((tmp_path / "a" / ".checkpoint.old" / "state.json").read_text())["epochs_done"] == 1
        epochs_seen = []
        resumed = train_target(members, pool, tmp_path / "a", MICRO, on_epoch_end=lambda e, _: epochs_seen.append(e))
        straight = train_target(members, pool, tmp_path / "b", MICRO)
    assert epochs_seen == [2, 3, 4]
    assert _same_weights(resumed, straight)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(p.name for p in (tmp_path / "b").iterdir())


def test_checkpoint_with_the_former_field_names_resumes(tmp_path, micro_texts):
    """A checkpoint saved when ``positions`` and ``doc_tokens`` were called ``context`` and ``max_tokens``."""
    members, pool = micro_texts
    cfg = dataclasses.replace(MICRO, epochs=2)

    def stop_after_first(epoch, loss):
        if epoch == 1:
            raise KeyboardInterrupt

    with single_thread():
        with pytest.raises(KeyboardInterrupt):
            train_target(members, pool, tmp_path, cfg, on_epoch_end=stop_after_first)
        state_file = tmp_path / "checkpoint" / "state.json"
        state = json.loads(state_file.read_text())
        config = state["identity"]["config"]
        config["context"], config["max_tokens"] = config.pop("positions"), config.pop("doc_tokens")
        state_file.write_text(json.dumps(state))
        model_dir = train_target(members, pool, tmp_path, cfg)
        meta = read_target_metadata(model_dir)
        assert [(s["start_epoch"], s["end_epoch"]) for s in meta["segments"]] == [(0, 1), (1, 2)]
        meta["identity"]["config"]["context"] = meta["identity"]["config"].pop("positions")
        (model_dir / "docaudit_target.json").write_text(json.dumps(meta))
        assert train_target(members, pool, tmp_path, cfg) == model_dir  # finished: not trained again
    assert read_target_metadata(model_dir)["segments"] == meta["segments"]


def test_more_epochs_continue_from_checkpoint(tmp_path, micro_texts):
    members, pool = micro_texts
    with single_thread():
        two = train_target(members, pool, tmp_path / "two", dataclasses.replace(MICRO, epochs=2))
        before = _weights(two)
        epochs_seen = []
        four = train_target(members, pool, tmp_path / "two", MICRO, on_epoch_end=lambda e, _: epochs_seen.append(e))
        after = _weights(four)
        with pytest.raises(DocauditError, match="already trained 4 epochs"):
            train_target(members, pool, tmp_path / "two", dataclasses.replace(MICRO, epochs=3))
    assert epochs_seen == [3, 4]
    meta = read_target_metadata(four)
    assert [(s["start_epoch"], s["end_epoch"]) for s in meta["segments"]] == [(0, 2), (2, 4)]
    assert [h["epoch"] for h in meta["history"]] == [1, 2, 3, 4]
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_llama_and_continued_pretraining(tmp_path, micro_texts):
    members, pool = micro_texts
    cfg = dataclasses.replace(MICRO, arch="llama", epochs=1)
    with single_thread():
        base = train_target(members, pool, tmp_path / "llama", cfg)
        assert AutoModelForCausalLM.from_pretrained(base).config.model_type == "llama"
        more = train_target(pool[3:], pool, tmp_path / "cont", dataclasses.replace(cfg, epochs=2), base_model=str(base))
    meta = read_target_metadata(more)
    assert meta["identity"]["base_model"] == str(base.resolve()) and meta["identity"]["pool_sha256"] is None
    assert AutoTokenizer.from_pretrained(more).get_vocab() == AutoTokenizer.from_pretrained(base).get_vocab()
    wb, wm = _weights(base), _weights(more)
    assert any(not torch.equal(wb[k], wm[k]) for k in wb)
