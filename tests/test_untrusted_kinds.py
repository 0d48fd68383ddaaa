"""Each kind of file docaudit reads, planted as a FIFO without a writer, a link to ``/dev/zero`` and a sparse file one
byte over its kind's limit: every read ends at once, as a one-line error (status 3 on the command line), a damaged
entry (a cache miss) or a folder left alone, never a hang or a read until memory runs out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import within
from test_cli import assert_clean_error, make_sets, run

from docaudit.config import DEFAULT_CLASSIFIER, READ_LIMITS
from docaudit.errors import BAD_INPUT, DocauditError

HANG_GUARD = 20  # seconds: a guard that turns a hang into a failure; every refusal here takes milliseconds
HOSTILE = ("fifo", "dev-zero", "sparse")


def plant(path: Path, how: str, kind: str) -> Path:
    """``path`` made hostile: a FIFO without a writer, a link to ``/dev/zero``, or a sparse file one byte over what
    a ``kind`` may hold (no disk space used)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as f:
            f.truncate(READ_LIMITS[kind] + 1)
    return path


@pytest.mark.parametrize("how", HOSTILE)
@pytest.mark.parametrize("kind", sorted(READ_LIMITS))
def test_the_checked_reader_refuses_every_kind_at_once(tmp_path, kind, how):
    from docaudit.untrusted import TooLarge, open_untrusted, read_untrusted, sha256_untrusted

    path = plant(tmp_path / "file", how, kind)
    for reader in (read_untrusted, open_untrusted, sha256_untrusted):
        with pytest.raises(TooLarge if how == "sparse" else OSError, match="not a regular file|may hold"):
            within(HANG_GUARD, reader, path, kind)


@pytest.fixture
def classifier(tmp_path) -> Path:
    """A copy of the shipped classifier's folder, to make one of its files hostile."""
    return Path(shutil.copytree(DEFAULT_CLASSIFIER, tmp_path / "clf"))


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_card_is_refused_by_predict_and_its_dry_run(classifier, doc, how):
    from docaudit.api.preflight import card_query
    from docaudit.methods.meta.persistence import read_card

    (classifier / "card.json").unlink()
    plant(classifier / "card.json", how, "card")
    for reader in (read_card, lambda p: card_query(p.parent)):
        with pytest.raises(DocauditError, match="cannot read classifier card"):
            within(HANG_GUARD, reader, classifier / "card.json")
    for extra in ([], ["--dry-run"]):
        result = within(HANG_GUARD, run, "predict", doc, "--classifier", classifier, *extra)
        assert result.exit_code == BAD_INPUT, result.output
        assert_clean_error(result, "cannot read classifier card")


@pytest.mark.parametrize("how", HOSTILE)
@pytest.mark.parametrize("name", ["classifier.skops", "conformal.skops", "folds.skops", "blind_folds.skops"])
def test_a_hostile_skops_file_is_refused(classifier, name, how):
    from docaudit.methods.meta.conformal_data import load_conformal
    from docaudit.methods.meta.folds import load_blind_folds, load_folds
    from docaudit.methods.meta.persistence import load_classifier

    (classifier / name).unlink(missing_ok=True)
    plant(classifier / name, how, "folds" if name == "blind_folds.skops" else name.removesuffix(".skops"))
    load = {
        "classifier.skops": load_classifier,
        "conformal.skops": load_conformal,
        "folds.skops": lambda d: load_folds(d, "tfidf", 5),
        "blind_folds.skops": lambda d: load_blind_folds(d, "tfidf", 5),
    }[name]
    refusal = "may hold" if how == "sparse" else f"no .*{name}|cannot read|not a regular file"
    with pytest.raises(DocauditError, match=refusal):  # a sparse file by its size, unread
        within(HANG_GUARD, load, classifier)


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_registry_is_refused_by_detect_and_make(tmp_path, tiny_gpt2, doc, how):
    from docaudit.corpus.traps import read_registry
    from docaudit.report.traps import check_registry_path

    registry = plant(tmp_path / "registry.json", how, "registry")
    with pytest.raises(DocauditError, match="registry .*(may hold|not a regular file)"):
        within(HANG_GUARD, read_registry, registry)
    for overwrite in (False, True):
        with pytest.raises(DocauditError, match="not a docaudit trap registry"):
            within(HANG_GUARD, check_registry_path, registry, tmp_path / "out", overwrite)
    result = within(HANG_GUARD, run, "traps", "detect", "--registry", registry, "--model", tiny_gpt2)
    assert result.exit_code == BAD_INPUT, result.output
    assert_clean_error(result, "registry")
    for extra in ([], ["--overwrite"]):
        args = ["traps", "make", doc, "--out", tmp_path / "out", "--registry", registry, "--generator", tiny_gpt2]
        result = within(HANG_GUARD, run, *args, *extra)
        assert result.exit_code == BAD_INPUT, result.output
        assert_clean_error(result, "not a docaudit trap registry")


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_output_marker_is_no_marker(tmp_path, tiny_gpt2, how):
    from docaudit.outputs import OUTPUT_MARKER, read_marker

    sets, out = make_sets(tmp_path), tmp_path / "out"
    plant(out / OUTPUT_MARKER, how, "output marker")
    (out / "mine.txt").write_text("a user's file\n")
    assert within(HANG_GUARD, read_marker, out) is None
    for extra in ([], ["--overwrite"]):
        args = ["evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2, "--out", out]
        result = within(HANG_GUARD, run, *args, "--methods", "loss", "--context", "8", *extra)
        assert result.exit_code == BAD_INPUT, result.output
        assert_clean_error(result, str(out))
    assert (out / "mine.txt").read_text() == "a user's file\n"


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_staging_marker_leaves_the_folder_alone(tmp_path, how):
    from docaudit.outputs import STAGING_MARKER, remove_stale_staging

    staging = tmp_path / ".out.abc123"
    plant(staging / STAGING_MARKER, how, "staging marker")
    within(HANG_GUARD, remove_stale_staging, tmp_path / "out")
    assert staging.is_dir()


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_controls_entry_or_lab_record_is_a_miss(tmp_path, how):
    from docaudit.audit.synthetic_controls import _read_cached
    from docaudit.config import ControlsConfig
    from docaudit.lab.checkpoints import METADATA_FILE, read_json, read_target_metadata

    entry = plant(tmp_path / "controls" / "entry.json", how, "controls entry")
    assert within(HANG_GUARD, _read_cached, entry, ControlsConfig()) is None
    record = plant(tmp_path / "target" / METADATA_FILE, how, "lab record")
    assert within(HANG_GUARD, read_json, record) is None
    with pytest.raises(DocauditError, match="not a docaudit target model"):
        within(HANG_GUARD, read_target_metadata, record.parent)


@pytest.mark.parametrize("how", HOSTILE)
def test_a_hostile_config_file_or_manifest_is_refused(tmp_path, how):
    from docaudit.cli.config_file import ConfigError, read_config_file
    from docaudit.corpus.filters import _manifest_years
    from docaudit.corpus.manifest import check_manifest_path, read_manifest

    config = plant(tmp_path / "settings.toml", how, "config")
    with pytest.raises(ConfigError, match="cannot read it|over"):
        within(HANG_GUARD, read_config_file, config)
    manifest = plant(tmp_path / "books.csv", how, "manifest")
    for reader in (read_manifest, _manifest_years):
        with pytest.raises((DocauditError, OSError)):
            within(HANG_GUARD, reader, manifest)
    if how == "sparse":  # a FIFO or device is "not a file" before it is read
        with pytest.raises(DocauditError, match="not a docaudit manifest"):
            within(HANG_GUARD, check_manifest_path, manifest, True)
