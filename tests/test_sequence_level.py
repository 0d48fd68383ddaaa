"""Sequence-level evaluation on a small WikiMIA-style file written here, with a tiny target."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text
from sklearn.metrics import roc_auc_score

from docaudit.audit.sequence_level import evaluate_sequences, length_bucket
from docaudit.cli import main
from docaudit.config import DetectorConfig, QueryConfig, SequenceConfig
from docaudit.corpus.datasets import DatasetSource
from docaudit.methods.detectors.detector import build_detector
from docaudit.metrics import min_nonmembers, tpr_at_fpr
from docaudit.run import DetectorSpec, ModelSpec, RunContext

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = [32, 64, 32, 64, 40, 70, 32, 64]


@pytest.fixture
def wikimia(tmp_path):
    """WikiMIA's schema (``input``, ``label``) with a BookMIA-style group column, 8 members and 8 non-members."""
    rows = []
    for i, b in enumerate(corpus_ids("members", 8) + corpus_ids("nonmembers", 8)):
        words = corpus_text("members" if i < 8 else "nonmembers", b, 21000, 3000).split()
        rows.append({"input": " ".join(words[: LENGTHS[i % 8]]), "label": int(i < 8), "book": f"b{i // 4}"})
    path = tmp_path / "wikimia.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows


def run(path, model, methods, config):
    return evaluate_sequences([DatasetSource(path, by_label=True)], [], ModelSpec(model), DetectorSpec(methods), config)


def test_length_buckets():
    words = (5, 31, 32, 45, 46, 64, 100, 200, 256, 1000)
    expected = (32, 32, 32, 32, 64, 64, 128, 256, 256, 256)
    assert [length_bucket(n, SequenceConfig.buckets) for n in words] == list(expected)


@pytest.mark.slow
def test_k_sweep_equals_single_k_runs_from_one_query_pass(gpt2, wikimia, tmp_path):
    path, rows = wikimia
    config = SequenceConfig(n_boot=50)
    result = run(path, gpt2, ["loss", "mink", "minkpp"], config)
    samples = result["samples"]
    # one query pass per text: one cached TokenStats entry each (no method here has an extra pass)
    cached = [f for _, _, files in os.walk(os.environ["DOCAUDIT_CACHE"]) for f in files if f.endswith(".npz")]
    assert len(cached) == len(rows)
    texts = [r["input"] for r in rows]
    for k in (0.1, 0.5, 1.0):
        single = build_detector(
            gpt2, QueryConfig(), ["mink", "minkpp"], DetectorConfig(k=k), cache=False, single_pass=config.max_context
        )
        scores = [single.score_text(t) for t in texts]
        for m in ("mink", "minkpp"):  # texts queried together (shared, padded batches): float32 rounding
            assert samples[f"{m}@{k:g}"].tolist() == pytest.approx([s[m] for s in scores], rel=1e-5, abs=1e-7)
    assert samples["mink@0.2"].tolist() == samples["mink"].tolist()  # the default k is one of the sweep
    # every sweep column is reported
    swept = result["metrics"][result["metrics"]["k"].notna()]
    assert len(swept) == 2 * len(config.ks) and set(swept["bucket"]) == {"all"}


def test_metrics_match_direct_computations(gpt2, wikimia):
    path, rows = wikimia
    result = run(path, gpt2, ["loss", "zlib"], SequenceConfig(n_boot=100))
    samples, metrics = result["samples"], result["metrics"]
    assert samples["id"].tolist() == [str(i) for i in range(16)]
    assert samples["label"].tolist() == [r["label"] for r in rows]
    assert sorted(set(samples["bucket"])) == [32, 64]
    for method in ("loss", "zlib"):
        for bucket, part in [("all", samples)] + [(str(b), p) for b, p in samples.groupby("bucket")]:
            row = metrics[(metrics.method == method) & (metrics.bucket == bucket)].iloc[0]
            y, s = part["label"].to_numpy(), part[method].to_numpy()
            assert row["auc"] == pytest.approx(roc_auc_score(y, s))
            for fpr, key in ((0.10, "tpr_at_10fpr"), (0.05, "tpr_at_5fpr"), (0.01, "tpr_at_1fpr")):
                if (y == 0).sum() < min_nonmembers(fpr):  # too few non-members: not estimated
                    assert row[key] is None or np.isnan(row[key])
                    continue
                assert row[key] == pytest.approx(tpr_at_fpr(y, s, fpr))
            assert row["auc_ci_low"] <= row["auc"] <= row["auc_ci_high"]


def test_recall_takes_its_prefix_from_the_nonmembers(gpt2, wikimia):
    """The prefix shots are non-members left out; a text that does not fit the 256-token window with the prefix
    is a named skip (ReCaLL over several windows would be another statistic), the others are scored."""
    from docaudit.methods.detectors.recall import OVER_WINDOW

    path, _ = wikimia
    config = SequenceConfig(n_boot=20, recall_shots=1)
    result = run(path, gpt2, ["recall", "dcpdd"], config)
    info = result["info"]
    skipped = [s for s in info["skipped"] if s["kind"] == OVER_WINDOW]
    assert skipped and info["n_members"] + info["n_nonmembers"] + len(skipped) == 15
    assert len(info["recall_prefix_ids"]) == 1
    assert not set(info["recall_prefix_ids"]) & set(result["samples"]["id"])
    assert np.isfinite(result["samples"][["recall", "dcpdd"]].to_numpy()).all()


def test_cli_writes_per_sample_scores_with_ids_labels_and_groups(tiny_gpt2, wikimia, tmp_path):
    path, rows = wikimia
    out = tmp_path / "seq"
    args = ["sequence", "--data", str(path), "--group-column", "book", "--model", str(tiny_gpt2)]
    args += ["--methods", "loss,mink", "--n-boot", "20", "--out", str(out), "--format", "csv"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("method,k,bucket,n_members,n_nonmembers,auc,auc_ci_low,auc_ci_high,tpr_at_10fpr")
    csv = pd.read_csv(out / "samples.csv", dtype={"id": str})
    jsonl = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert csv["group"].tolist() == [r["book"] for r in rows] == [j["group"] for j in jsonl]
    assert csv["id"].tolist() == [str(i) for i in range(16)] == [j["id"] for j in jsonl]
    assert csv["loss"].tolist() == pytest.approx([j["loss"] for j in jsonl])
    assert "mink@0.5" in csv.columns
    assert json.loads((out / "sequence_metrics.json").read_text())["info"]["n_members"] == 8
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 3 and "--overwrite" in again.output  # an earlier output is not replaced silently


def test_blind_baseline_beside_the_detectors(gpt2, wikimia):
    """The blind rows are the AUCs of out-of-fold scores from classifiers fit without the held-out texts; sets that
    differ by a date in every text are told apart by them, with the shift warning."""
    path, rows = wikimia
    config = SequenceConfig(n_boot=20, blind_folds=4)
    result = run(path, gpt2, ["loss"], config)
    samples, metrics, info = result["samples"], result["metrics"], result["info"]
    blind = [c for c in samples.columns if c.startswith("blind:")]
    assert blind == ["blind:tfidf", "blind:nb", "blind:dates"]
    overall = metrics[(metrics["bucket"] == "all") & metrics["k"].isna()].set_index("method")
    labels = samples["label"].to_numpy()
    for column in blind:
        assert samples[column].notna().all()  # every text is in exactly one held-out chunk
        assert overall.loc[column, "auc"] == pytest.approx(roc_auc_score(labels, samples[column]))
    # a held-out text's score does not depend on its own label: flipping it leaves the score unchanged
    from docaudit.methods.blind import blind_scores
    from docaudit.metrics import chunk_folds

    texts = [r["input"] for r in rows]
    train, test = chunk_folds(labels, 4, RunContext().seed)[0]
    direct = blind_scores([texts[i] for i in train], labels[train], [texts[i] for i in test], "tfidf")
    assert samples["blind:tfidf"].to_numpy()[test] == pytest.approx(direct)
    assert info["blind_auc"] == pytest.approx(overall.loc[blind, "auc"].max())
    # the same texts, each member dated 1890 and each non-member 2025: the words alone separate the sets
    shifted = path.with_name("shifted.jsonl")
    dated = [r | {"input": f"In {1890 if r['label'] else 2025}, " + r["input"]} for r in rows]
    shifted.write_text("".join(json.dumps(r) + "\n" for r in dated), encoding="utf-8")
    warned = run(shifted, gpt2, ["loss"], config)["info"]
    assert warned["blind_auc"] == 1.0 and "distribution shift" in warned["warning"]
    off = run(path, gpt2, ["loss"], SequenceConfig(n_boot=20, blind_folds=0))
    assert not any(c.startswith("blind:") for c in off["samples"].columns) and off["info"]["blind_auc"] is None
