import os
import pickle

import numpy as np
import pytest
import skops.io as sio
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from docaudit.config import DEFAULT_CLASSIFIER
from docaudit.errors import DocauditError
from docaudit.methods.meta.persistence import load_classifier

CARD = (DEFAULT_CLASSIFIER / "card.json").read_text()


def test_file_with_untrusted_code_is_refused(tmp_path):
    evil = Pipeline([("run", FunctionTransformer(func=os.system, kw_args={"command": f"touch {tmp_path}/pwned"}))])
    (tmp_path / "classifier.skops").write_bytes(sio.dumps(evil))
    (tmp_path / "card.json").write_text(CARD)
    with pytest.raises(DocauditError, match="untrusted types"):
        load_classifier(tmp_path)
    assert not (tmp_path / "pwned").exists()


def test_pickle_disguised_as_classifier_is_refused(tmp_path):
    (tmp_path / "classifier.skops").write_bytes(pickle.dumps({"a": np.arange(3)}))
    (tmp_path / "card.json").write_text(CARD)
    with pytest.raises(DocauditError, match="cannot read classifier"):
        load_classifier(tmp_path)


def test_missing_classifier_directory(tmp_path):
    with pytest.raises(DocauditError, match="no docaudit classifier"):
        load_classifier(tmp_path / "nope")
