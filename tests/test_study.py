"""The dose-response study script end to end at its tiny scale: the table it writes is checked against AUCs,
verdicts and perplexity ratios recomputed here from the per-document numbers it saved, and a rerun resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CORPUS
from sklearn.metrics import roc_auc_score

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "study_dose_response.py"
EXPOSURES, TOKENS = (1, 10), (24, 96)  # two of the tiny scale's four exposures and three lengths: 6 cells, not 15

pytestmark = pytest.mark.slow


def _run(out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), "--tiny", "--out", str(out), "--corpus", str(CORPUS), "--threads", "1"]
    cmd += ["--exposures", ",".join(map(str, EXPOSURES)), "--tokens", ",".join(map(str, TOKENS))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    done = _run(out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _brute_verdict_shares(scores, labels, auc_low: float, alpha: float = 0.05) -> tuple[float, float]:
    """Share of members and of non-members with q < alpha: p = (1 + #other non-members scoring at least as high) /
    (n + 1), q by Benjamini-Hochberg written out; none when 1 / (n + 1) is not below alpha or the classifier's AUC
    interval reaches down to 0.5 (gates shared by every document, so BH runs over all or none)."""
    nm = np.flatnonzero(labels == 0)
    n = len(nm) - 1
    p = np.array([(1 + sum(scores[j] >= scores[i] for j in nm if j != i)) / (n + 1) for i in range(len(scores))])
    order = np.argsort(p)
    m = len(p)
    q = np.empty(m)
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m / rank)
        q[i] = running
    evidence = (q < alpha) & (1 / (n + 1) < alpha) & (auc_low > 0.5)
    return evidence[labels == 1].mean(), evidence[labels == 0].mean()


def test_table_layout(study):
    table = pd.read_csv(study / "study.csv")
    assert {"exposures", "tokens", "method", "auc", "ci_low", "ci_high"} <= set(table.columns)
    trained = table[table.model == "trained"]
    for e in EXPOSURES:
        for t in TOKENS:
            cell = trained[(trained.exposures == e) & (trained.tokens == t)]
            assert {"meta_classifier", "minkpp", "mink", "loss", "zlib"} <= set(cell.method)
            assert cell.method.str.contains("blind").any()
    assert set(table[table.model == "base"].exposures) == {0}
    assert ((table.ci_low <= table.auc + 1e-9) & (table.auc <= table.ci_high + 1e-9)).all()
    for name in ("study.md", "study.png", "cells.csv", "perplexity.csv", "loss_change.csv", "timings.json"):
        assert (study / name).is_file(), name


def test_aucs_match_saved_scores(study):
    table = pd.read_csv(study / "study.csv")
    for cell in sorted((study / "cells").iterdir()):
        keys = json.loads((cell / "cell.json").read_text())
        scores = pd.read_csv(cell / "scores.csv")
        rows = table[
            (table.model == keys["model"]) & (table.exposures == keys["exposures"]) & (table.tokens == keys["tokens"])
        ]
        for method, column in (("meta_classifier", "meta_classifier:document"), ("loss", "loss:doc_avg")):
            expected = roc_auc_score(scores.label, scores[column])
            assert rows[rows.method == method].auc.item() == pytest.approx(expected, abs=0.006), (cell.name, method)
        # the members are exactly the exposure group (all members for the base model), against all non-members
        plan = json.loads((study / "plan.json").read_text())["exposures"]
        members = set(scores.document[scores.label == 1].astype(str))
        e = keys["exposures"]
        assert members == {i for i, x in plan.items() if (x > 0 if e == 0 else x == e)}
        assert set(scores.document[scores.label == 0].astype(str)) == {i for i, x in plan.items() if x == 0}


def test_verdict_shares_match_brute_force(study):
    cells = pd.read_csv(study / "cells.csv")
    table = pd.read_csv(study / "study.csv")
    meta = table[table.method == "meta_classifier"].set_index(["model", "exposures", "tokens"])
    for r in cells.itertuples():
        scores = pd.read_csv(study / "cells" / f"{r.model}_e{r.exposures}_t{r.tokens}" / "scores.csv")
        members, nonmembers = _brute_verdict_shares(
            scores["meta_classifier:document"].to_numpy(float),
            scores.label.to_numpy(),
            meta.loc[(r.model, r.exposures, r.tokens), "ci_low"],
        )
        assert r.evidence_share_members == pytest.approx(members)
        assert r.evidence_share_nonmembers == pytest.approx(nonmembers)


def test_perplexity_ratio(study):
    docs = pd.read_csv(study / "perplexity.csv")
    change = pd.read_csv(study / "loss_change.csv").set_index("exposures")
    for e, g in docs.groupby("exposures"):
        ratio = np.exp(np.log(np.exp(g.trained_loss) / np.exp(g.base_loss)).mean())
        assert change.loc[e, "ppl_ratio"] == pytest.approx(ratio, rel=1e-9)
    # the most-seen members gained more than the non-members, which were never trained on
    assert change.loc[max(EXPOSURES), "ppl_ratio"] < change.loc[0, "ppl_ratio"]


def test_rerun_resumes_without_redoing_cells(study):
    timings = json.loads((study / "timings.json").read_text())
    cells = sorted(study.glob("cells/*/cell.json"))
    stamps = {p: p.stat().st_mtime_ns for p in cells}
    redo = cells[0]
    redo.unlink()  # as if the run had stopped before this cell finished
    done = _run(study)
    assert done.returncode == 0, done.stderr[-3000:]
    after = json.loads((study / "timings.json").read_text())
    new = {k for k in after if len(after[k]) > len(timings.get(k, []))}
    cell_stages = {k for k in new if k.startswith("cell ")}
    assert len(cell_stages) == 1 and redo.parent.name.split("_")[0] in next(iter(cell_stages))
    assert redo.is_file()
    assert all(p.stat().st_mtime_ns == stamps[p] for p in cells if p != redo)
    assert "step " not in done.stdout  # training was not redone


def test_training_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """Training stopped after step 5 (checkpoint every 3 steps) and run again ends with the weights of an
    uninterrupted run."""
    import torch

    sys.path.insert(0, str(SCRIPT.parents[1]))
    from studies.train import TrainPlan, continue_pretraining

    from docaudit.config import TargetConfig
    from docaudit.lab.target import build_model
    from docaudit.lab.tokenizer import train_tokenizer

    texts = [p.read_text(encoding="utf-8")[5000:8000] for p in sorted((CORPUS / "nonmembers").glob("*.txt"))[:6]]
    tokenizer = train_tokenizer(texts, 300)
    base = tmp_path / "base"
    build_model(TargetConfig(layers=1, width=32, heads=2, positions=32), len(tokenizer), 0).save_pretrained(base)
    tokenizer.save_pretrained(base)
    docs = {str(i): tokenizer(t).input_ids[:60] for i, t in enumerate(texts)}
    exposures = {"0": 1, "1": 2, "2": 5, "3": 1, "4": 2, "5": 5}
    plan = TrainPlan(learning_rate=1e-3, block=32, batch_size=2, warmup_fraction=0.1, checkpoint_every=3, seed=0)
    whole = continue_pretraining(str(base), docs, exposures, tmp_path / "whole", plan, "cpu", "float32")

    real_step, calls = torch.optim.AdamW.step, []

    def stop_after_five(self, *a, **k):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(1)
        return real_step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", stop_after_five)
    with pytest.raises(KeyboardInterrupt):
        continue_pretraining(str(base), docs, exposures, tmp_path / "cut", plan, "cpu", "float32")
    monkeypatch.setattr(torch.optim.AdamW, "step", real_step)
    saved = json.loads((tmp_path / "cut" / "checkpoint" / "state.json").read_text())
    assert saved["step"] == 3
    resumed = continue_pretraining(str(base), docs, exposures, tmp_path / "cut", plan, "cpu", "float32")
    done = json.loads((resumed / "study_train.json").read_text())
    assert done["step"] == done["total_steps"] == json.loads((whole / "study_train.json").read_text())["step"]
    from transformers import AutoModelForCausalLM

    a = AutoModelForCausalLM.from_pretrained(whole).state_dict()
    b = AutoModelForCausalLM.from_pretrained(resumed).state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    # the embedding was frozen: unchanged from the base model
    c = AutoModelForCausalLM.from_pretrained(base).state_dict()
    key = next(k for k in a if "wte" in k)
    assert torch.equal(a[key], c[key]) and not all(torch.equal(a[k], c[k]) for k in a)
