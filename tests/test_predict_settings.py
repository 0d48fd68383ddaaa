"""`predict` with the card's model: --device, --dtype, --quantize and --revision are applied to it where they mean
something and refused with the reason where not, never silently dropped."""

import json

import pytest
from conftest import document_sets
from test_cli import assert_clean_error, run

from docaudit.audit.card_model import card_model
from docaudit.errors import DocauditError


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return document_sets(tmp_path_factory.mktemp("predict-sets"), n=2)["non"]


def _predict(trained, docs, *options):
    return run("predict", "--classifier", trained, "--format", "json", *options, docs)


def test_dtype_and_device_apply_to_the_cards_model(trained, docs, caplog):
    plain = _predict(trained, docs)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["model"]["dtype"] == "float32"
    half = _predict(trained, docs, "--dtype", "bfloat16")
    assert half.exit_code == 0, half.output
    assert json.loads(half.stdout)["model"]["dtype"] == "bfloat16"
    assert "classifier trained on float32 queries, predicting with bfloat16" in caplog.text
    assert_clean_error(_predict(trained, docs, "--device", "no-such-device"), "no-such-device")


def test_quantize_applies_and_revision_is_refused_for_a_local_model(trained, docs):
    quantized = _predict(trained, docs, "--quantize", "int8")
    assert quantized.exit_code == 0, quantized.output
    assert json.loads(quantized.stdout)["model"]["quantization"] == "int8"
    refused = _predict(trained, docs, "--revision", "main")
    assert_clean_error(refused, "--revision: this classifier's model is the local")


CARD = {"model_identity": "hub:org/model@0123", "model_config": {"model": "org/model"}}


def test_revision_applies_to_a_hub_model_and_run_here_settings_not_to_a_server():
    config = card_model(CARD, use_card_backend=True, user={"revision": "v2", "device": "cpu", "dtype": "float16"})
    assert (config.revision, config.device, config.dtype) == ("v2", "cpu", "float16")
    assert card_model(CARD, use_card_backend=True).revision is None
    served = {
        "model_identity": "openai:http://127.0.0.1:1/v1#m",
        "model_config": {"backend": "openai", "api_base": "http://127.0.0.1:1/v1", "api_model": "m"},
    }
    for setting in ({"device": "cpu"}, {"dtype": "float16"}, {"quantize": "int8"}, {"revision": "v2"}):
        with pytest.raises(DocauditError, match=f"--{next(iter(setting))}: this classifier's model runs on a server"):
            card_model(served, use_card_backend=True, user=setting)
    gguf = {"model_identity": "gguf@ab", "model_config": {"model": "/m.gguf", "backend": "llamacpp"}}
    for setting in ("device", "dtype", "quantize"):
        with pytest.raises(DocauditError, match=f"--{setting}: this classifier's model runs through llama.cpp"):
            card_model(gguf, user={setting: "x"})
    with pytest.raises(DocauditError, match="--revision: this classifier's model is the local /m.gguf"):
        card_model(gguf, user={"revision": "v2"})
