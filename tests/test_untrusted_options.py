"""Every count option has a range, checked with one line (exit 3) before any work: no document read, no model
loaded, no memory asked for (``--bins 2000000000`` was accepted and killed for memory)."""

import pytest
from test_cli import assert_clean_error, run

from docaudit import api
from docaudit.config import (
    ContaminationConfig,
    DatasetTestConfig,
    DetectorConfig,
    MetaConfig,
    QueryConfig,
    ScalingConfig,
    SequenceConfig,
    TargetConfig,
    TrainConfig,
    TrapConfig,
)
from docaudit.errors import DocauditError


@pytest.fixture
def sets(tmp_path):
    for name in ("m", "n"):
        (tmp_path / name).mkdir()
        for i in range(6):
            (tmp_path / name / f"{name}{i}.txt").write_text(f"Text number {i} of {name}, with a few words.\n")
    return tmp_path / "m", tmp_path / "n"


@pytest.fixture
def no_work(monkeypatch):
    """Every API function that could start work fails the test when reached."""

    def reached(*args, **kwargs):
        raise AssertionError("the command started working before checking its options")

    for name in ("train", "grid", "evaluate", "score", "sequence", "report", "lab", "dataset_test", "traps_make"):
        monkeypatch.setattr(api, name, reached)


@pytest.mark.parametrize(
    "command, options, message",
    [
        ("train", ["--bins", "2000000000"], "--bins 2000000000 is out of range: allowed 1..100000"),
        ("train", ["--trees", "0"], "--trees 0 is out of range: allowed 1.."),
        ("train", ["--trees", "-3"], "--trees -3 is out of range"),
        ("train", ["--min-tokens", "-1"], "--min-tokens -1 is out of range"),
        ("train", ["--context", "4000000000"], "--context 4000000000 is out of range"),
        ("train", ["--batch-size", "100000000"], "--batch-size 100000000 is out of range"),
        ("evaluate", ["--sequences", "0"], "--sequences 0 is out of range: allowed 1..100000"),
        ("evaluate", ["--sequences", "1000000000"], "--sequences 1000000000 is out of range"),
        ("evaluate", ["--pac-copies", "100000000"], "--pac-copies 100000000 is out of range"),
        ("sequence", ["--resamples", "0"], "--resamples 0 is out of range"),
        ("sequence", ["--resamples", "10000000000"], "--resamples 10000000000 is out of range"),
    ],
)
def test_a_count_out_of_range_is_refused_before_any_work(sets, no_work, command, options, message, tmp_path):
    members, nonmembers = sets
    out = ["--out", tmp_path / "out"] if command == "train" else []
    assert_clean_error(run(command, "--members", members, "--nonmembers", nonmembers, *out, *options), message)


@pytest.mark.parametrize(
    "options, message",
    [
        (["--snippets", "0"], "--snippets 0 is out of range"),
        (["--snippets", "1000000000"], "--snippets 1000000000 is out of range"),
        (["--snippet-words", "1000000000"], "--snippet-words 1000000000 is out of range"),
        (["--resamples", "10000000000"], "--resamples 10000000000 is out of range"),
    ],
)
def test_report_counts_are_refused_before_any_work(sets, no_work, options, message, tmp_path):
    members, nonmembers = sets
    result = run("report", members, "--calibrate-members", members, "--calibrate-nonmembers", nonmembers,
                 "--out", tmp_path / "rep", *options)  # fmt: skip
    assert_clean_error(result, message)


def test_lab_and_dataset_test_counts_are_refused_before_any_work(sets, no_work, tmp_path):
    members, nonmembers = sets
    lab = ("lab", "--corpus", members, "--out", tmp_path / "lab")
    assert_clean_error(run(*lab, "--epochs", "10000000000"), "--epochs 10000000000 is out of range")
    assert_clean_error(run(*lab, "--vocab-size", "2000000000"), "--vocab-size 2000000000 is out of range")
    assert_clean_error(run(*lab, "--trap-copies", "100000000"), "--trap-copies 100000000 is out of range")
    test = ("dataset-test", members, "--nonmembers", nonmembers)
    assert_clean_error(run(*test, "--splits", "0"), "--splits 0 is out of range")


@pytest.mark.parametrize(
    "cls, values",
    [
        (MetaConfig, {"bins": 10**9}),
        (MetaConfig, {"n_estimators": 0}),
        (MetaConfig, {"folds": 1}),
        (MetaConfig, {"bins": 2.5}),
        (TrainConfig, {"min_tokens": -1}),
        (ScalingConfig, {"n_sequences": 0}),
        (DetectorConfig, {"neighbors": 10**9}),
        (QueryConfig, {"context": 10**10}),
        (QueryConfig, {"batch_size": 10**9}),
        (ContaminationConfig, {"book_bootstrap": 10**10}),
        (SequenceConfig, {"n_boot": 0}),
        (DatasetTestConfig, {"splits": 10**9}),
        (TargetConfig, {"width": 10**7, "heads": 1}),
        (TrapConfig, {"max_candidates": 10**12}),
    ],
)
def test_every_count_of_the_configuration_has_a_range(cls, values):
    with pytest.raises(DocauditError, match="is out of range|is not a whole number"):
        cls(**values)


@pytest.mark.parametrize(
    "suffix, text, message",
    [
        (".yaml", "predict:\n  use-card-backend: 1\n", "[predict] use-card-backend = 1: expected true or false"),
        (".toml", "[predict]\nuse-card-backend = 1\n", "[predict] use-card-backend = 1: expected true or false"),
        (".toml", "[predict]\nstrict = 0\n", "[predict] strict = 0: expected true or false"),
        (".toml", "[predict]\nalpha = true\n", "[predict] alpha = True: expected a number"),
        (".toml", "[predict]\napi-retries = true\n", "[predict] api-retries = True: expected a whole number"),
        (".toml", "[predict]\napi-retries = 1.5\n", "[predict] api-retries = 1.5: expected a whole number"),
        (".toml", "[predict]\nmodel = 5\n", "[predict] model = 5: expected a quoted string"),
        (".yaml", "predict:\n  format: 1\n", "[predict] format = 1: expected a quoted string"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_one_line(sets, tmp_path, suffix, text, message):
    config = tmp_path / f"c{suffix}"
    config.write_text(text)
    result = run("predict", "--config", config, sets[0])
    assert_clean_error(result, message)
    assert result.exit_code == 2  # a --config file that cannot be used, as the README's table says
