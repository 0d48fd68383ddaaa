"""The embedded model's tokenizer read straight from its conversion's ``tokenizer.json``: the same tokenizer as
``AutoTokenizer`` gives (ids, special tokens, decoding, hash), other models untouched."""

from __future__ import annotations

from pathlib import Path

from conftest import corpus_ids, corpus_text

from docaudit.query.backends.transformers import _embedded_tokenizer
from docaudit.query.loaded import tokenizer_hash
from docaudit.query.sources import ModelSource


def test_the_embedded_tokenizer_is_autotokenizers_own(tiny_llama):
    from transformers import AutoTokenizer

    embedded = ModelSource(None, "embedded@0", gguf=Path("model.gguf"))
    fast = _embedded_tokenizer(embedded, str(tiny_llama))
    auto = AutoTokenizer.from_pretrained(tiny_llama)
    assert fast is not None and tokenizer_hash(fast) == tokenizer_hash(auto)
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=5000)
    assert fast(text).input_ids == auto(text).input_ids  # the BOS included
    assert fast.all_special_ids == auto.all_special_ids and fast.pad_token_id == auto.pad_token_id
    ids = auto(text, add_special_tokens=False).input_ids
    assert fast.decode(ids, skip_special_tokens=True) == auto.decode(ids, skip_special_tokens=True)


def test_other_models_and_damaged_files_go_through_autotokenizer(tiny_llama, tmp_path):
    named = ModelSource(str(tiny_llama), "local:abc", gguf=Path("model.gguf"))
    assert _embedded_tokenizer(named, str(tiny_llama)) is None  # a GGUF the user named
    assert _embedded_tokenizer(ModelSource(None, "x", path=tiny_llama), str(tiny_llama)) is None
    (tmp_path / "tokenizer.json").write_text("{not json")
    assert _embedded_tokenizer(ModelSource(None, "x", gguf=Path("m.gguf")), str(tmp_path)) is None
