"""Benchmark datasets read as documents: one small file per known schema, written here (never a copy of a
benchmark), with texts cut from the shared corpus."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit.cli import main
from docaudit.config import DatasetConfig
from docaudit.corpus.datasets import DatasetSource, read_dataset
from docaudit.corpus.documents import Skips, labelled_documents, load_documents
from docaudit.errors import DocauditError


def texts(n: int = 8, n_chars: int = 300) -> list[str]:
    ids = corpus_ids("members", 4) + corpus_ids("nonmembers", 4)
    return [corpus_text("members" if i < 4 else "nonmembers", b, 20000 + 1000 * i, n_chars) for i, b in enumerate(ids)][
        :n
    ]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_wikimia_jsonl_input_label(tmp_path):
    t = texts()
    f = write_jsonl(tmp_path / "wikimia.jsonl", [{"input": x, "label": i % 2} for i, x in enumerate(t)])
    docs = load_documents(f)
    assert [d.text for d in docs] == t  # verbatim, no cleaning
    assert [d.label for d in docs] == [i % 2 for i in range(8)]
    assert [d.id for d in docs] == [str(i) for i in range(8)]
    assert docs[3].path == f"{f}#3"


def test_bookmia_csv_groups_join_into_documents(tmp_path):
    t = texts()
    frame = pd.DataFrame({"snippet": t, "label": [1, 1, 1, 0, 0, 0, 1, 1], "book_id": list("aaabbbcc")})
    f = tmp_path / "bookmia.csv"
    frame.to_csv(f, index=False)
    snippets = load_documents(f)
    assert len(snippets) == 8 and snippets[0].group is None  # no group unless named
    books = read_dataset(DatasetSource(f, DatasetConfig(group_column="book_id")))
    assert [(d.id, d.label) for d in books] == [("a", 1), ("b", 0), ("c", 1)]
    assert books[0].text == "\n\n".join(t[:3])
    kept = read_dataset(DatasetSource(f, DatasetConfig(group_column="book_id", join_groups=False)))
    assert [d.group for d in kept] == list("aaabbbcc")


def test_pac_stackmia_jsonl_snippet_label_with_id_column(tmp_path):
    t = texts(4)
    f = write_jsonl(
        tmp_path / "stackmia.jsonl", [{"qid": f"q{i}", "snippet": x, "label": 1 - i % 2} for i, x in enumerate(t)]
    )
    docs = read_dataset(DatasetSource(f, DatasetConfig(id_column="qid")))
    assert [(d.id, d.label) for d in docs] == [("q0", 1), ("q1", 0), ("q2", 1), ("q3", 0)]


def test_mimir_parquet_member_nonmember_pairs(tmp_path):
    t = texts()
    f = tmp_path / "mimir.parquet"
    pd.DataFrame({"member": t[:4], "nonmember": t[4:]}).to_parquet(f)
    docs, labels, _ = labelled_documents([DatasetSource(f, by_label=True)], [])
    assert sorted(d.text for d in docs if d.label == 1) == sorted(t[:4])
    assert labels.tolist() == [1] * 4 + [0] * 4
    assert docs[0].id == "0:member"


def test_saved_hf_dataset_and_split(tmp_path):
    import datasets

    t = texts()
    dd = datasets.DatasetDict(
        {
            "WikiMIA_length32": datasets.Dataset.from_dict({"input": t[:4], "label": [1, 0, 1, 0]}),
            "WikiMIA_length64": datasets.Dataset.from_dict({"input": t[4:], "label": [0, 1, 0, 1]}),
        }
    )
    dd.save_to_disk(tmp_path / "wikimia")
    with pytest.raises(DocauditError, match="choose a split with --split"):
        load_documents(tmp_path / "wikimia")
    docs = read_dataset(DatasetSource(tmp_path / "wikimia", DatasetConfig(split="WikiMIA_length64")))
    assert [d.text for d in docs] == t[4:]
    docs = read_dataset(f"hf:{tmp_path / 'wikimia'}:WikiMIA_length32")  # hf: also names a saved folder
    assert [d.text for d in docs] == t[:4]


def test_hub_id_offline_fails_fast_with_one_line(tmp_path):
    result = CliRunner().invoke(main, ["data", "check", "hf:swj0419/WikiMIA:WikiMIA_length32", "hf:x/y"])
    assert result.exit_code == 3
    assert result.output.startswith("error: hf:swj0419/WikiMIA:WikiMIA_length32: cannot load the dataset")
    assert len(result.output.strip().splitlines()) == 1


def test_bad_rows_are_counted_named_skips(tmp_path):
    t = texts(4)
    f = tmp_path / "bad.jsonl"
    f.write_text(
        "\n".join(
            [
                json.dumps({"text": t[0], "label": 1}),
                json.dumps({"text": "", "label": 0}),
                json.dumps({"text": t[1], "label": "maybe"}),
                "{not json",
                json.dumps({"text": t[2], "label": 0}),
                json.dumps({"label": 1}),
            ]
        ),
        encoding="utf-8",
    )
    skips = Skips()
    docs = load_documents(f, skips=skips)
    assert [d.text for d in docs] == [t[0], t[2]]
    kinds = {(s["file"], s["kind"]) for s in skips.as_json()}
    assert kinds == {(f"{f}#1", "no text"), (f"{f}#2", "bad label"), (f"{f}:4", "bad row"), (f"{f}#5", "no text")}
    with pytest.raises(DocauditError, match="line 4 is not valid JSON"):
        load_documents(f)  # without skips the first bad row is an error


def test_column_errors_name_the_columns(tmp_path):
    f = write_jsonl(tmp_path / "x.jsonl", [{"body": "some words here", "y": 1}])
    with pytest.raises(DocauditError, match=r"no text column \(looked for text, input, snippet\).*columns: body, y"):
        load_documents(f)
    with pytest.raises(DocauditError, match="no label column 'lab'"):
        read_dataset(DatasetSource(f, DatasetConfig(text_column="body", label_column="lab")))
    with pytest.raises(DocauditError, match="needs a label column"):
        labelled_documents([DatasetSource(f, DatasetConfig(text_column="body"), by_label=True)], [])
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DocauditError, match="cannot read as PARQUET"):
        load_documents(bad)


def test_mixed_labels_in_a_group_are_skipped(tmp_path):
    t = texts(4)
    f = write_jsonl(
        tmp_path / "g.jsonl", [{"snippet": x, "label": lab, "book": b} for x, lab, b in zip(t, [1, 0, 1, 1], "aabb")]
    )
    skips = Skips()
    docs = read_dataset(DatasetSource(f, DatasetConfig(group_column="book")), skips)
    assert [d.id for d in docs] == ["b"]
    assert skips.as_json()[0]["kind"] == "mixed labels"


def test_data_check_and_evaluate_read_a_labelled_file(tmp_path, tiny_gpt2):
    t = texts(n_chars=1200)
    f = write_jsonl(
        tmp_path / "data.jsonl", [{"text": x, "label": int(i < 4), "book": i // 2} for i, x in enumerate(t)]
    )
    runner = CliRunner()
    result = runner.invoke(
        main, ["evaluate", "--data", str(f), "--methods", "blind", "--folds", "2", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)["info"]
    assert (info["n_members"], info["n_nonmembers"]) == (4, 4)
    args = ["evaluate", "--data", str(f), "--group-column", "book", "--model", str(tiny_gpt2), "--methods", "loss"]
    args += ["--no-meta", "--no-blind", "--folds", "2", "--sequences", "2", "--context", "32", "--format", "json"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["info"]["n_members"], out["info"]["n_nonmembers"]) == (2, 2)  # groups are documents
    assert {r["level"] for r in out["methods"]} == {"sequence", "doc_avg", "doc_threshold"}
    result = runner.invoke(main, ["evaluate", "--methods", "blind"])
    assert result.exit_code == 3 and "give --members and --nonmembers, or --data" in result.output


def test_score_reads_a_dataset_row_by_row(tmp_path, tiny_gpt2):
    t = texts(3)
    f = write_jsonl(tmp_path / "rows.jsonl", [{"id": f"r{i}", "text": x} for i, x in enumerate(t)] + [{"text": " "}])
    args = ["score", str(f), "--model", str(tiny_gpt2), "--methods", "loss", "--context", "64", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [r["file"] for r in rows] == [f"{f}#r0", f"{f}#r1", f"{f}#r2", f"{f}#3"]
    assert "loss" in rows[0] and rows[3]["skipped"] == "no text in column 'text'"
