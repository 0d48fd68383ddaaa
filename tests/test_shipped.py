"""What ships in the package answers with reasons about the evidence, never about itself: every shipped
classifier has what per-document p-values need (its fold models and full-conformal training data, readable by this
version), so `predict` never tells a new user to train it again."""

from pathlib import Path

import pytest

from docaudit.audit.meta import inconclusive_reasons
from docaudit.config import DEFAULT_CLASSIFIER
from docaudit.methods.meta.conformal_data import load_conformal
from docaudit.methods.meta.folds import conformal_card, load_folds
from docaudit.methods.meta.persistence import load_classifier

SHIPPED = sorted(p for p in DEFAULT_CLASSIFIER.parent.iterdir() if (p / "card.json").is_file())


def test_the_default_is_shipped():
    assert DEFAULT_CLASSIFIER in SHIPPED


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_shipped_classifier_is_current(folder: Path):
    """Loaded as `predict` loads it; the reasons that depend on the folder alone hold no `retrain`."""
    _, card = load_classifier(folder)
    conformal = conformal_card(card, folder)
    assert conformal is not None, "no conformal section in the card: the fold models are missing"
    meta_models, blind_models = load_folds(folder, conformal["blind_kind"], len(conformal["nonmember_scores"]))
    assert len(meta_models) == len(blind_models) == len(conformal["nonmember_scores"])
    data = load_conformal(folder)
    reasons = inconclusive_reasons(card, conformal, n_tokens=1 << 30, p_blind=None, retrain=data is None)
    assert "retrain" not in [r.code for r in reasons], [r.text for r in reasons]
    n_nonmembers = int((data["labels"] == 0).sum())
    assert n_nonmembers + int((data["labels"] == 1).sum()) == len(card["inputs"])
