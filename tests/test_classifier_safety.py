"""A classifier folder is data: crafted cards and files are refused on one line before any model code runs, models
are found and identified by content, and `predict` says how far its own classifier can be trusted."""

import json
import shutil

import numpy as np
import pytest
import skops.io as sio
from conftest import make_model
from sklearn.dummy import DummyClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler
from test_cli import FAST, assert_clean_error, make_sets, run

from docaudit.config import FEATURES, NORMS, MetaConfig
from docaudit.errors import DocauditError
from docaudit.methods.meta.classifier import build_pipeline
from docaudit.methods.meta.persistence import load_classifier, save_classifier
from docaudit.query.stats import TokenStats


@pytest.fixture(scope="module")
def trained_64(tmp_path_factory, tiny_gpt2):
    """A classifier trained on a tiny model with 64-token excerpts (the coverage checks need them), and its document
    sets."""
    sets = make_sets(tmp_path_factory.mktemp("sets"))
    out = tmp_path_factory.mktemp("models") / "tiny"
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        *FAST,
        "--max-tokens",
        "64",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    return out, sets


def copy_classifier(src, dst, **card_changes):
    shutil.copytree(src, dst)
    card = json.loads((dst / "card.json").read_text())
    for key, value in card_changes.items():
        if isinstance(value, dict):
            card[key] = {**card[key], **value}
        else:
            card[key] = value
    (dst / "card.json").write_text(json.dumps(card))
    return dst


EVIL_CLASSES = """
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
class EvilConfig(GPT2Config):
    model_type = "evil"
class EvilModel(GPT2LMHeadModel):
    config_class = EvilConfig
class EvilTokenizer(PreTrainedTokenizerFast):
    pass
"""


def evil_model(tiny_gpt2, dst, marker):
    """A copy of the tiny model (same weights) whose config asks for its own code, which would create ``marker``."""
    shutil.copytree(tiny_gpt2, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(
        model_type="evil", auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}
    )
    (dst / "config.json").write_text(json.dumps(config))
    tokenizer_config = json.loads((dst / "tokenizer_config.json").read_text())
    tokenizer_config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]}
    (dst / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (dst / "evil.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n" + EVIL_CLASSES)
    return dst


def test_card_cannot_turn_on_remote_code(trained_64, tiny_gpt2, tmp_path):
    classifier, sets = trained_64
    marker = tmp_path / "pwned"
    evil = evil_model(tiny_gpt2, tmp_path / "evil-model", marker)
    crafted = copy_classifier(
        classifier, tmp_path / "evil", model_config={"model": str(evil), "trust_remote_code": True}
    )
    book = sorted(sets["mem"].iterdir())[0]
    result = run("predict", "--classifier", crafted, book)
    assert not marker.exists()
    assert_clean_error(result, "unknown model")


def test_other_local_model_is_refused_before_loading(trained_64, tiny_gpt2, tmp_path):
    """Even with the user's --trust-remote-code, a model whose content differs from the card's is never loaded."""
    classifier, sets = trained_64
    marker = tmp_path / "pwned"
    other = make_model(tmp_path / "other", "gpt2", seed=1)
    evil = evil_model(other, tmp_path / "evil-model", marker)
    crafted = copy_classifier(classifier, tmp_path / "evil", model_config={"model": str(evil)})
    book = sorted(sets["mem"].iterdir())[0]
    result = run("predict", "--classifier", crafted, "--trust-remote-code", book)
    assert not marker.exists()
    assert_clean_error(result, "trained for model")


def _tampered(classifier, tmp_path, steps):
    pipe, _ = load_classifier(classifier)
    out = shutil.copytree(classifier, tmp_path / "tampered")
    (out / "classifier.skops").write_bytes(sio.dumps(Pipeline(steps(pipe.steps))))
    return out


def test_forest_replaced_by_a_constant_is_refused(trained_64, tmp_path):
    classifier, _ = trained_64
    always = DummyClassifier(strategy="constant", constant=1).fit(np.zeros((2, 1)), [0, 1])
    out = _tampered(classifier, tmp_path, lambda steps: steps[:3] + [("forest", always)])
    with pytest.raises(DocauditError, match="untrusted types.*DummyClassifier"):
        load_classifier(out)


def test_inserted_function_transformer_is_refused(trained_64, tmp_path):
    classifier, _ = trained_64
    negate = FunctionTransformer(np.negative)
    out = _tampered(classifier, tmp_path, lambda steps: steps[:3] + [("negate", negate)] + steps[3:])
    with pytest.raises(DocauditError, match="untrusted types.*FunctionTransformer"):
        load_classifier(out)


def test_allowed_types_in_another_shape_are_refused(trained_64, tmp_path):
    classifier, _ = trained_64
    out = _tampered(classifier, tmp_path, lambda steps: steps[:3] + [("again", MinMaxScaler())] + steps[3:])
    with pytest.raises(DocauditError, match="not a docaudit classifier"):
        load_classifier(out)


def synthetic_stats(n, rng, vocab=40, length=60):
    return [
        TokenStats(
            token_ids=rng.integers(0, vocab, length),
            logp=-rng.random(length - 1) * 5,
            max_logp=-rng.random(length - 1),
            mu=-rng.random(length - 1) * 3,
            sigma=rng.random(length - 1),
            gp_sum=rng.random(vocab) * length,
            vocab_size=vocab,
            context=16,
            stride=15,
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("features", FEATURES)
def test_every_configuration_loads_back(tmp_path, trained_64, norm, features):
    """The allow-list covers what every normalization and feature extractor saves."""
    rng = np.random.default_rng(0)
    stats, labels = synthetic_stats(12, rng), np.array([0, 1] * 6)
    pipe = build_pipeline(MetaConfig(n_estimators=3, bins=10, n_jobs=1), 0, norm, features)
    pipe.fit(np.array(stats, dtype=object), labels)
    card = json.loads((trained_64[0] / "card.json").read_text()) | {"configuration": f"{norm}+{features}"}
    save_classifier(tmp_path, pipe, card)
    loaded, _ = load_classifier(tmp_path)
    X = np.array(stats, dtype=object)
    assert np.array_equal(loaded.predict_proba(X), pipe.predict_proba(X))


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"model_identity": "x"}', "lacks the field(s) model_config"),
    ],
)
def test_bad_card_is_one_line(trained_64, tmp_path, content, message):
    classifier, sets = trained_64
    out = shutil.copytree(classifier, tmp_path / "bad")
    (out / "card.json").write_text(content)
    assert_clean_error(run("predict", "--classifier", out, sorted(sets["mem"].iterdir())[0]), message)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"query": {"context": "sixteen"}}, "'context' has the wrong type"),
        ({"model_config": {"evil": 1}}, "unknown field 'evil'"),
        ({"raw": "no"}, "'raw' must be a bool"),
        ({"sklearn_version": "1.2.0"}, "written with scikit-learn 1.2.0"),
        ({"skops_version": "99.0"}, "written with skops 99.0"),
    ],
)
def test_card_with_wrong_fields_or_versions_is_refused(trained_64, tmp_path, changes, message):
    classifier, sets = trained_64
    out = copy_classifier(classifier, tmp_path / "bad", **changes)
    assert_clean_error(run("predict", "--classifier", out, sorted(sets["mem"].iterdir())[0]), message)


def test_empty_classifier_file_is_one_line(trained_64, tmp_path):
    out = shutil.copytree(trained_64[0], tmp_path / "empty")
    (out / "classifier.skops").write_bytes(b"")
    with pytest.raises(DocauditError, match="the file is empty"):
        load_classifier(out)


def test_card_records_library_versions_and_absolute_model_path(trained_64, tiny_gpt2):
    import sklearn
    import skops

    card = json.loads((trained_64[0] / "card.json").read_text())
    assert card["sklearn_version"] == sklearn.__version__ and card["skops_version"] == skops.__version__
    assert card["model_config"]["model"] == str(tiny_gpt2.resolve())
    assert card["model_identity"].startswith("local@")


def test_relative_model_path_resolves_from_anywhere(tiny_gpt2, tmp_path, monkeypatch):
    """train with a relative --model path, then predict from another folder: the card's model is found locally."""
    shutil.copytree(tiny_gpt2, tmp_path / "work" / "tiny")
    sets = make_sets(tmp_path)
    monkeypatch.chdir(tmp_path / "work")
    assert (
        run(
            "train", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", "tiny", *FAST, "--out", "clf"
        ).exit_code
        == 0
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = run("predict", "--classifier", tmp_path / "work" / "clf", "--format", "json", sets["non"])
    assert result.exit_code == 0, result.output


def test_copy_of_the_model_under_another_name_is_accepted(trained_64, tiny_gpt2, tmp_path):
    classifier, sets = trained_64
    copy = shutil.copytree(tiny_gpt2, tmp_path / "renamed-copy")
    result = run("predict", "--classifier", classifier, "--model", copy, "--format", "json", sets["non"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "reference,message",
    [
        ("gone/model-dir", "relative path 'gone/model-dir'"),
        ("/nonexistent/model-dir", "no longer at /nonexistent/model-dir"),
    ],
)
def test_missing_local_model_is_an_error_not_a_hub_request(trained_64, tmp_path, reference, message):
    classifier, sets = trained_64
    out = copy_classifier(classifier, tmp_path / "moved", model_config={"model": reference})
    assert_clean_error(run("predict", "--classifier", out, sorted(sets["mem"].iterdir())[0]), message)


def test_unknown_hub_id_fails_fast(sets_dir):
    """No hub here (or a hub without this id): one line, not transformers' retries."""
    result = run("score", "--model", "no-such-org/no-such-model-xyz", "--methods", "loss", sets_dir["mem"])
    assert_clean_error(result, "unknown model 'no-such-org/no-such-model-xyz'")
    messages = [line for line in result.stderr.splitlines() if line.strip() and "%|" not in line]
    assert len(messages) == 1, result.stderr


def test_offline_mode_fails_at_once(sets_dir, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    result = run("score", "--model", "no-such-org/no-such-model-xyz", "--methods", "loss", sets_dir["mem"])
    assert_clean_error(result, "HF_HUB_OFFLINE is set")


@pytest.fixture()
def sets_dir(tmp_path):
    return make_sets(tmp_path)


def test_predict_reports_classifier_auc_and_coverage(trained_64):
    classifier, sets = trained_64
    card = json.loads((classifier / "card.json").read_text())
    auc = card["pooled_bootstrap_95"]["auc"]
    result = run("predict", "--classifier", classifier, "--format", "json", sets["non"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    for row in rows:
        assert row["classifier_auc"] == auc["point"] and (
            row["classifier_auc_ci_low"],
            row["classifier_auc_ci_high"],
        ) == (
            auc["ci_low"],
            auc["ci_high"],
        )
        assert row["n_tokens"] == 64 < row["n_tokens_total"]
        assert ("includes 0.5" in row["reason"]) == (auc["ci_low"] <= 0.5 <= auc["ci_high"])
    table = run("predict", "--classifier", classifier, sets["non"])
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert f"classifier AUC {auc['point']:.3f} (95% interval {auc['ci_low']:.3f}-{auc['ci_high']:.3f})" in lines[0]
    for row in rows:  # per document: its file, then the verdict line, then the numbers
        at = lines.index(row["file"])
        assert (
            lines[at + 1].strip().startswith(row["verdict"])
            and f"tokens 64 of {row['n_tokens_total']}" in lines[at + 2]
        )


@pytest.mark.parametrize("lo,hi", [(0.4, 0.7), (0.7, 0.9)])
def test_chance_warning_follows_the_interval(trained_64, tmp_path, lo, hi):
    classifier, sets = trained_64
    card = json.loads((classifier / "card.json").read_text())
    bootstrap = {**card["pooled_bootstrap_95"], "auc": {"point": (lo + hi) / 2, "lo": lo, "hi": hi}}
    out = copy_classifier(classifier, tmp_path / "c", pooled_bootstrap_95=bootstrap)
    result = run("predict", "--classifier", out, "--format", "json", sorted(sets["non"].iterdir())[0])
    assert result.exit_code == 0, result.output
    reason = json.loads(result.stdout)["rows"][0]["reason"] or ""
    assert ("includes 0.5" in reason) == (lo <= 0.5 <= hi), reason
    if lo <= 0.5 <= hi:
        assert f"{lo:.3f}-{hi:.3f}" in reason and "better than chance" in reason


def test_hub_that_does_not_know_the_id_is_asked_once(sets_dir):
    """A (local) hub answering 404: one request, no retries, one line."""
    import http.server
    import os
    import subprocess
    import sys
    import threading
    from pathlib import Path

    requests = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "Repository not found"}')

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}", "HF_HUB_OFFLINE": "0"}
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "docaudit.cli",
                "score",
                "--model",
                "no-such-org/no-such-model-xyz",
                "--methods",
                "loss",
                str(sets_dir["mem"]),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parents[1],
            timeout=120,
        )
    finally:
        server.shutdown()
    lines = [line for line in result.stderr.splitlines() if line.strip() and "%|" not in line]
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: unknown model 'no-such-org/no-such-model-xyz'") and "no such model" in lines[0]
    assert [r for r in requests if "no-such-model-xyz" in r] == ["/api/models/no-such-org/no-such-model-xyz"], requests
