"""Crafted classifier folders are refused on one line before anything uses them: trees that loop or point outside
their arrays, skops files that inflate past their bound, cards whose fields would end in a traceback or lose a
reason, and a forged weights memo; a forest's scores are the same bytes on every run."""

import copy
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from zipfile import ZIP_DEFLATED

import numpy as np
import pytest
import skops.io as sio
from conftest import corpus_ids, corpus_text, make_model
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from test_cli import assert_clean_error, run

import docaudit
from docaudit.config import MetaConfig
from docaudit.errors import DocauditError
from docaudit.methods.meta.classifier import as_documents, build_pipeline, evaluate, fit
from docaudit.methods.meta.folds import FOLDS_FILE, check_blind, conformal_card, load_folds, save_folds
from docaudit.methods.meta.persistence import CLASSIFIER_FILE, load_classifier, read_card

HANG_GUARD = 300  # seconds a command may take before the test calls it hung (a refusal takes a few)


@pytest.fixture
def doc(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=600))
    return path


def edit_tree(forest, edit) -> None:
    """Apply ``edit`` to the node array of the forest's largest tree, as a crafted file would hold it."""
    tree = max((e.tree_ for e in forest.estimators_), key=lambda t: t.node_count)
    assert tree.node_count >= 5  # two inner nodes at least
    state = tree.__getstate__()
    edit(state["nodes"])
    tree.__setstate__(state)


def first_leaf(nodes) -> int:
    return int(np.flatnonzero(nodes["left_child"] == -1)[0])


def second_inner(nodes) -> int:
    return int(np.flatnonzero(nodes["left_child"] != -1)[1])


def root_children(value):
    """Both children of the root set to ``value``, so that every document takes the crafted branch."""

    def edit(nodes):
        nodes["left_child"][0] = nodes["right_child"][0] = value

    return edit


EDITS = {
    "self-loop": (root_children(0), "not a later node"),
    "out of range": (root_children(10**9), "not a later node"),
    "left self-loop": (lambda n: n["left_child"].__setitem__(0, 0), "not a later node"),
    "back to the root": (lambda n: n["right_child"].__setitem__(second_inner(n), 0), "not a later node"),
    "negative child": (lambda n: n["left_child"].__setitem__(0, -5), "not a later node"),
    "one child": (lambda n: n["right_child"].__setitem__(first_leaf(n), first_leaf(n) + 1), "one child"),
    "shared child": (lambda n: n["right_child"].__setitem__(0, n["left_child"][0]), "one tree"),
    "leaf with a split": (lambda n: n["feature"].__setitem__(first_leaf(n), 0), "a leaf has a split"),
    "threshold NaN": (lambda n: n["threshold"].__setitem__(0, np.nan), "threshold"),
}


@pytest.fixture(scope="module")
def grown(trained, tmp_path_factory) -> Path:
    """A copy of ``trained`` whose classifier and fold meta-classifiers are forests of deeper trees (fitted on
    synthetic statistics), so that a crafted tree can have more than one split."""
    out = shutil.copytree(trained, tmp_path_factory.mktemp("grown") / "classifier")
    section = conformal_card(read_card(out / "card.json"), out)
    _, blind = load_folds(out, section["blind_kind"], len(section["nonmember_scores"]))
    pipe = build_pipeline(MetaConfig(n_estimators=4, bins=20, n_jobs=1, max_depth=4, min_samples_leaf=1), 0)
    pipe.fit(as_documents(synthetic_stats(40, vocab=512)), np.array([0, 1] * 20))  # the tiny model's vocabulary
    (out / CLASSIFIER_FILE).write_bytes(sio.dumps(pipe, compression=ZIP_DEFLATED))
    save_folds(out, [pipe] * len(blind), blind)
    return out


def crafted_classifier(trained, tmp_path, edit) -> Path:
    pipe, _ = load_classifier(trained)
    edit_tree(pipe.named_steps["forest"], edit)
    out = shutil.copytree(trained, tmp_path / "crafted")
    (out / CLASSIFIER_FILE).write_bytes(sio.dumps(pipe, compression=ZIP_DEFLATED))
    return out


@pytest.mark.parametrize("case", EDITS)
def test_a_malformed_tree_in_the_classifier_is_refused(grown, tmp_path, case):
    edit, message = EDITS[case]
    crafted = crafted_classifier(grown, tmp_path, edit)
    with pytest.raises(DocauditError, match=f"tree [0-9]+ of the forest is malformed: .*{message}"):
        load_classifier(crafted)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["self-loop", "out of range"])
def test_predict_with_a_looping_or_out_of_range_tree_is_one_line_not_a_hang_or_a_crash(grown, tmp_path, doc, case):
    """Before, the self-loop made ``predict`` loop forever and the index out of range crashed it (SIGSEGV)."""
    crafted = crafted_classifier(grown, tmp_path, EDITS[case][0])
    result = subprocess.run(
        [sys.executable, "-m", "docaudit", "predict", "--classifier", str(crafted), str(doc)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(Path(docaudit.__file__).parents[1])},
    )
    assert result.returncode == 3, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: refusing to load") and "malformed" in lines[-1]
    assert "Traceback" not in result.stderr


def test_a_malformed_tree_in_the_fold_models_is_refused(grown, tmp_path):
    section = conformal_card(read_card(grown / "card.json"), grown)
    kind, k = section["blind_kind"], len(section["nonmember_scores"])
    meta, blind = load_folds(grown, kind, k)
    meta[-1] = copy.deepcopy(meta[-1])
    edit_tree(meta[-1].named_steps["forest"], EDITS["self-loop"][0])
    crafted = shutil.copytree(grown, tmp_path / "crafted")
    save_folds(crafted, meta, blind)
    with pytest.raises(DocauditError, match="refusing to load .*folds.skops.*malformed: .*not a later node"):
        load_folds(crafted, kind, k)


@pytest.mark.parametrize("case", ["self-loop", "out of range", "leaf with a split"])
def test_a_malformed_tree_in_a_blind_forest_is_refused(tmp_path, case):
    rng = np.random.default_rng(0)
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(rng.random((40, 4)), [0, 1] * 20)
    model = Pipeline([("clf", forest)])
    check_blind(model, "dates", tmp_path / FOLDS_FILE)  # sound as fitted
    edit_tree(forest, EDITS[case][0])
    with pytest.raises(DocauditError, match="blind model of kind dates is malformed"):
        check_blind(model, "dates", tmp_path / FOLDS_FILE)


# --- decompression bombs ----------------------------------------------------------------------------------------

BOMB = 512 << 20  # inflated bytes of each bomb; the child process may grow by HEADROOM only
HEADROOM = 256 << 20

LIMITED = """
import resource, sys
from pathlib import Path
from docaudit.errors import DocauditError
from docaudit.methods.meta.persistence import load_classifier
from docaudit.query.cache import StatsCache
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize() + {headroom}
resource.setrlimit(resource.RLIMIT_AS, (size, size))
try:
    if sys.argv[1] == "classifier":
        load_classifier(Path(sys.argv[2]))
        print("loaded")
    else:
        print("hit" if StatsCache(Path(sys.argv[2])).get(sys.argv[3]) is not None else "miss")
except DocauditError as e:
    print(f"refused: {{e}}")
    sys.exit(3)
"""


def run_limited(*args) -> subprocess.CompletedProcess:
    """Run ``LIMITED`` in a process whose address space may grow by ``HEADROOM`` beyond what its imports took."""
    env = {**os.environ, "PYTHONPATH": str(Path(docaudit.__file__).parents[1]), "OPENBLAS_NUM_THREADS": "1"}
    code = LIMITED.format(headroom=HEADROOM)
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=HANG_GUARD, env=env
    )


def write_spaces(archive: zipfile.ZipFile, name: str, head: bytes, n: int) -> None:
    """A member ``head`` followed by ``n`` spaces, deflated a chunk at a time (the bomb never sits in memory)."""
    info = zipfile.ZipInfo(name)
    info.compress_type = ZIP_DEFLATED
    with archive.open(info, "w", force_zip64=True) as member:
        member.write(head)
        chunk = b" " * (8 << 20)
        for _ in range(n // len(chunk)):
            member.write(chunk)


@pytest.mark.slow
def test_a_skops_file_whose_schema_inflates_to_half_a_gigabyte_is_refused_in_bounded_memory(trained, tmp_path):
    crafted = shutil.copytree(trained, tmp_path / "bomb")
    original = zipfile.ZipFile(io.BytesIO((trained / CLASSIFIER_FILE).read_bytes()))
    with zipfile.ZipFile(crafted / CLASSIFIER_FILE, "w", ZIP_DEFLATED) as bomb:
        for info in original.infolist():
            if info.filename == "schema.json":
                write_spaces(bomb, "schema.json", original.read(info), BOMB)
            else:
                bomb.writestr(info, original.read(info))
    assert (crafted / CLASSIFIER_FILE).stat().st_size < 8 << 20
    result = run_limited("classifier", crafted)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr[-2000:])
    assert "decompression bomb" in result.stdout


def test_a_skops_member_inflating_past_the_bound_is_refused_before_it_is_read(trained, tmp_path):
    crafted = shutil.copytree(trained, tmp_path / "bomb")
    with zipfile.ZipFile(crafted / CLASSIFIER_FILE, "a", ZIP_DEFLATED) as archive:
        write_spaces(archive, "extra.npy", b"", 128 << 20)
    with pytest.raises(DocauditError, match="would inflate to .*decompression bomb"):
        load_classifier(crafted)


@pytest.mark.slow
def test_a_cache_entry_that_inflates_to_half_a_gigabyte_is_a_miss_in_bounded_memory(tmp_path):
    root, key = tmp_path / "cache", "ab" * 32
    path = root / "stats" / key[:2] / f"{key}.npz"
    path.parent.mkdir(parents=True)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (BOMB // 4,)})
    with zipfile.ZipFile(path, "w", ZIP_DEFLATED) as bomb:
        for name in ("token_ids", "max_logp", "mu", "sigma"):
            with bomb.open(f"{name}.npy", "w") as member:
                np.save(member, np.zeros(3))
        with bomb.open("meta.npy", "w") as member:
            np.save(member, np.array([10, 16, 15]))
        write_spaces(bomb, "logp.npy", header.getvalue(), BOMB)
    result = run_limited("cache", root, key)
    assert result.returncode == 0 and result.stdout.strip() == "miss", (result.stdout, result.stderr[-2000:])


# --- a forged weights-hash memo ---------------------------------------------------------------------------------


def test_a_forged_weights_memo_does_not_make_another_model_pass_for_the_classifiers(trained, tiny_gpt2, tmp_path, doc):
    """The memo of another model rewritten to hold the classifier's model's hash: ``predict --model other`` used to
    run with the identity (and cached statistics) of the classifier's model."""
    from docaudit.query.cache import cache_root
    from docaudit.query.sources import resolve_source, same_model, weights_hash

    expected = read_card(trained / "card.json")["model_identity"]
    other = make_model(tmp_path / "other", seed=1)
    memos = cache_root() / "weights-hash"
    before = set(memos.glob("*.txt")) if memos.is_dir() else set()
    assert not same_model(resolve_source(str(other)).identity, expected)
    (memo,) = set(memos.glob("*.txt")) - before
    memo.write_text(weights_hash(Path(tiny_gpt2), memo=False))
    assert same_model(resolve_source(str(other)).identity, expected)  # the forged memo is read ...
    result = run("predict", "--classifier", trained, "--model", other, doc)
    assert_clean_error(result, "trained for model")  # ... but decides nothing
    assert run("predict", "--classifier", trained, "--model", tiny_gpt2, doc).exit_code == 0


# --- cards ------------------------------------------------------------------------------------------------------


def forged_card(trained, tmp_path, change) -> Path:
    out = shutil.copytree(trained, tmp_path / "forged")
    card = json.loads((out / "card.json").read_text())
    change(card)
    (out / "card.json").write_text(json.dumps(card))
    return out


def set_auc(card, **values):
    card["pooled_bootstrap_95"]["auc"].update(values)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda c: c.pop("configuration"), "lacks the field(s) configuration"),
        (lambda c: c.update(configuration=7), "'configuration' must be a str"),
        (lambda c: c.update(configuration="shouting+hist"), "'configuration' must name a normalization"),
        (lambda c: c.update(configuration="max_tf"), "'configuration' must name a normalization"),
        (lambda c: c.update(configuration="none+hist"), "uses max_tf+hist"),
        (lambda c: set_auc(c, ci_low=float("nan")), "ci_low <= point <= ci_high in [0, 1]"),
        (lambda c: set_auc(c, point=float("nan")), "ci_low <= point <= ci_high in [0, 1]"),
        (lambda c: set_auc(c, ci_low=0.9, ci_high=0.1), "ci_low <= point <= ci_high in [0, 1]"),
        (lambda c: c["blind"].update(blind_auc=float("nan")), "blind.blind_auc must be a number"),
        (lambda c: c.update(normalize_chars="yes"), "'normalize_chars' must be true or false"),
    ],
)
def test_a_card_with_a_missing_or_impossible_field_is_refused_on_one_line(trained, tmp_path, doc, change, message):
    """Before, a card without ``configuration``, with an int or an unknown norm ended in a traceback (status 70),
    and a NaN AUC was accepted: the reason "its AUC interval includes 0.5" silently disappeared."""
    forged = forged_card(trained, tmp_path, change)
    assert_clean_error(run("predict", "--classifier", forged, doc), message)


# --- the same bytes on every run --------------------------------------------------------------------------------


def synthetic_stats(n, seed=0, vocab=40, length=60):
    from test_classifier_safety import synthetic_stats as make

    return make(n, np.random.default_rng(seed), vocab, length)


def test_a_fitted_forest_gives_the_same_bytes_on_every_prediction_with_many_jobs():
    """With ``n_jobs`` > 1, the trees' probabilities were added in the order the threads finished: ten predictions
    of the same documents gave ten different arrays."""
    stats, labels = synthetic_stats(60), np.array([0, 1] * 30)
    meta = MetaConfig(n_estimators=300, bins=10, n_jobs=8, parallel_from=0, norm="max_tf", features="hist")
    estimator = fit(stats, labels, meta, 0)
    X = as_documents(synthetic_stats(200, seed=1))
    assert len({estimator.predict_proba(X).tobytes() for _ in range(10)}) == 1


@pytest.mark.slow
def test_an_evaluation_with_many_jobs_gives_the_same_bytes_twice():
    stats, labels = synthetic_stats(60), np.array([0, 1] * 30)
    meta = MetaConfig(
        n_estimators=100,
        bins=10,
        n_jobs=8,
        parallel_from=0,
        norm="auto",
        norms=("none", "max_tf"),
        features="hist",
        folds=2,
    )
    runs = [evaluate(stats, labels, meta, 0, progress=False) for _ in range(2)]
    assert runs[0].scores.tobytes() == runs[1].scores.tobytes() and runs[0].configs == runs[1].configs


def test_a_loaded_classifier_predicts_on_one_job_whatever_its_file_says(trained, tmp_path):
    pipe, card = load_classifier(trained)
    pipe.named_steps["forest"].n_jobs = 10**6
    crafted = shutil.copytree(trained, tmp_path / "jobs")
    (crafted / CLASSIFIER_FILE).write_bytes(sio.dumps(pipe, compression=ZIP_DEFLATED))
    loaded, _ = load_classifier(crafted)
    assert loaded.named_steps["forest"].n_jobs == 1
