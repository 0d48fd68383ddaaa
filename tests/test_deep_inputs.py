"""Values nested or sized past what Python's readers take (JSON nested 100,000 deep, an integer of 5,000 digits)
in a trap registry or a JSONL row are a one-line refusal or a named skip, never an internal error."""

from __future__ import annotations

import json

import pytest
from conftest import corpus_ids, corpus_text

from docaudit.corpus.documents import Skips, load_documents
from docaudit.corpus.traps import read_registry
from docaudit.errors import DocauditError

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" + "0" * 5000


def test_a_registry_nested_100k_deep_is_one_line(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(DEEP)
    with pytest.raises(DocauditError, match="registry .*: not valid JSON"):
        read_registry(registry)


@pytest.mark.parametrize("bad", [DEEP, '{"text": "x", "label": ' + HUGE + "}"], ids=["nested", "5000 digits"])
def test_a_jsonl_row_too_deep_or_too_long_to_read_is_a_named_skip(tmp_path, bad):
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=300)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": text, "label": 1}) + "\n" + bad + "\n", encoding="utf-8")
    skips = Skips()
    assert [d.text for d in load_documents(rows, skips=skips)] == [text]
    assert [(s["file"], s["kind"]) for s in skips.as_json()] == [(f"{rows}:2", "bad row")]
    with pytest.raises(DocauditError, match="line 2 cannot be read"):
        load_documents(rows)


def test_an_existing_registry_nested_100k_deep_is_not_taken_for_a_registry(tmp_path):
    from docaudit.report.traps import check_registry_path

    registry = tmp_path / "registry.json"
    registry.write_text(DEEP)
    with pytest.raises(DocauditError, match="exists and is not a docaudit trap registry"):
        check_registry_path(registry, tmp_path / "out", overwrite=True)


def test_a_target_record_nested_100k_deep_is_not_a_target(tmp_path):
    from docaudit.lab.checkpoints import METADATA_FILE, read_target_metadata

    (tmp_path / METADATA_FILE).write_text(DEEP)
    with pytest.raises(DocauditError, match="is not a docaudit target model"):
        read_target_metadata(tmp_path)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"id,lab\xffel\n1,member\n", "not valid UTF-8"),
        (b"id," + b"x" * 200_000 + b"\n1,2\n", "not a readable CSV"),
    ],
    ids=["not UTF-8", "a field of 200,000 characters"],
)
def test_a_manifest_that_cannot_be_read_as_csv_is_one_line(tmp_path, content, message):
    from docaudit.corpus.manifest import read_manifest

    manifest = tmp_path / "manifest.csv"
    manifest.write_bytes(content)
    with pytest.raises(DocauditError, match=message):
        read_manifest(manifest)
