"""GGUF models (the embedded default is one): the one-time conversion says what it is doing, and a copy of the file
under another name is the same model."""

import json
import shutil

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text, make_model
from test_cli import run

from docaudit.query.models import resolve_source

# Hugging Face Llama tensor names -> GGUF names (llama.cpp's convention)
GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def write_gguf(model_dir, path, add_bos: bool | None = None):
    """Write a tiny Hugging Face Llama model as a float32 GGUF file (q/k rows permuted as llama.cpp stores them);
    ``add_bos``: whether its tokenizer starts encodings with BOS (default: as the model's tokenizer does)."""
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    c = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    writer.add_vocab_size(c.vocab_size)
    bpe = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # the GPT-2 split before BPE, as the tokenizer's ByteLevel pre-tokenizer
    writer.add_token_list(sorted(bpe["vocab"], key=bpe["vocab"].get))
    writer.add_token_types([1] * len(bpe["vocab"]))
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in bpe["merges"]])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_add_bos_token(tokenizer("a").input_ids[0] == tokenizer.bos_token_id if add_bos is None else add_bos)
    writer.add_eos_token_id(tokenizer.eos_token_id)

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    top = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    heads = {"self_attn.q_proj": c.num_attention_heads, "self_attn.k_proj": c.num_key_value_heads}
    for key, value in model.state_dict().items():
        w = value.numpy().astype(np.float32)
        if key in top:
            writer.add_tensor(top[key], w)
            continue
        layer, part = key.split(".")[2], ".".join(key.split(".")[3:-1])
        writer.add_tensor(f"blk.{layer}.{GGUF_NAMES[part]}.weight", permute(w, heads[part]) if part in heads else w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gguf")
    return write_gguf(make_model(directory / "hf", "llama"), directory / "tiny.gguf")


def test_first_conversion_is_kept(tiny_gguf, tmp_path):
    """Converted once, used again; stderr is not a terminal here, so no progress is shown (tests/test_quiet.py
    shows the conversion's steps with progress on)."""
    doc = tmp_path / "doc.txt"
    doc.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=600))
    args = ("score", "--model", tiny_gguf, "--methods", "loss", "--context", "16", "--format", "json", doc)
    first = run(*args)
    assert first.exit_code == 0, first.output
    assert "converting" not in first.stderr
    assert list((tmp_path / "cache").rglob("*.safetensors"))
    again = run(*args)
    assert again.exit_code == 0 and "converting" not in again.stderr
    assert json.loads(again.stdout)["rows"][0]["loss"] == json.loads(first.stdout)["rows"][0]["loss"]


def test_the_load_time_kept_leaves_out_the_first_conversion(tiny_gguf, monkeypatch):
    """A first use converts the file once; the load time kept for later estimates is a later run's, without it (a
    conversion of minutes kept as the load time made every later estimate minutes too long)."""
    import time

    from docaudit.config import ModelConfig
    from docaudit.query import rates, sources
    from docaudit.query.models import load_model

    convert = sources._convert_gguf

    def slow(*args):
        time.sleep(2.0)
        convert(*args)

    monkeypatch.setattr(sources, "_convert_gguf", slow)
    config = ModelConfig(model=str(tiny_gguf), backend="transformers", device="cpu")
    start = time.perf_counter()
    with rates.clock() as spent:
        load_model(config).model  # noqa: B018 (the weights, deferred, load on first access)
    assert time.perf_counter() - start >= 2.0 and spent["load"] >= 2.0  # the command's own time counts it
    assert rates.measured(rates.model_key(config), "load_s") < 1.5


def test_copy_under_another_name_is_the_same_model(tiny_gguf, tmp_path):
    copy = shutil.copy(tiny_gguf, tmp_path / "renamed.gguf")
    assert resolve_source(str(copy)).identity == resolve_source(str(tiny_gguf)).identity
