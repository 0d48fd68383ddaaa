"""Quantized querying (bitsandbytes int8 / int4) runs on CPU and stays close to float32."""

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text, make_model

from docaudit.config import ModelConfig, QueryConfig
from docaudit.query.models import load_model
from docaudit.query.querier import Querier

pytest.importorskip("bitsandbytes")


@pytest.fixture(scope="module")
def llama128(tmp_path_factory):
    """bitsandbytes' 4-bit kernels need layers wider than the default tiny model's."""
    return make_model(tmp_path_factory.mktemp("llama128"), "llama", width=128)


@pytest.mark.parametrize("quantize", [pytest.param("int8", marks=pytest.mark.slow), "int4"])
def test_quantized_losses_close_to_float32(llama128, quantize):
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=2000)
    full = Querier(load_model(ModelConfig(model=str(llama128), device="cpu")), QueryConfig(context=32)).stats(text)
    lm = load_model(ModelConfig(model=str(llama128), device="cpu", quantize=quantize))
    assert lm.precision == quantize
    quant = Querier(lm, QueryConfig(context=32)).stats(text)
    assert np.array_equal(quant.token_ids, full.token_ids)
    assert not np.array_equal(quant.logp, full.logp)  # the weights really were quantized
    assert abs(quant.logp.mean() / full.logp.mean() - 1) < 0.02
