"""Every JSON output of every command (printed with --format json, or written as a file) carries the one envelope
and validates against its schema in the package (docaudit/schemas); the schemas are valid JSON Schemas, each can
fail, and interval bounds are named ``ci_low``/``ci_high`` everywhere."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text, make_model
from labtarget import excerpts, single_thread
from referencing import Registry, Resource
from test_cli import FAST, make_sets

import docaudit
from docaudit.cli import main
from docaudit.provenance import COMMAND_SCHEMAS, ENVELOPE_KEYS, SCHEMA_VERSION, envelope

SCHEMAS = Path(docaudit.__file__).parent / "schemas"
KINDS = sorted(
    p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json") if p.name != "envelope.schema.json"
)
FORMER_BOUNDS = ("lo", "hi", "delta_ci", "classifier_auc_ci")


def load(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


REGISTRY = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in map(load, ["envelope", *KINDS])
)


def validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load(kind), registry=REGISTRY, format_checker=jsonschema.FormatChecker())


def validate(output: dict, kind: str) -> None:
    """``output`` is a ``kind`` output: its schema's name, valid against the schema, no former interval names."""
    assert output["schema"] == {"name": kind, "version": SCHEMA_VERSION}
    assert list(output)[: len(ENVELOPE_KEYS)] == list(ENVELOPE_KEYS)  # the envelope first, then the results
    validator(kind).validate(output)
    assert not former_bounds(output), former_bounds(output)


def former_bounds(value, path="") -> list[str]:
    """Keys that name an interval's bounds the former ways (``lo``/``hi``, ``*_lo``/``*_hi``, two-element lists)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in FORMER_BOUNDS or key.endswith(("_lo", "_hi")):
                found.append(f"{path}.{key}")
            found += former_bounds(item, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            found += former_bounds(item, f"{path}[]")
    return found


def test_the_schemas_are_valid_and_cover_every_output():
    assert set(KINDS) >= set(COMMAND_SCHEMAS.values()) | {"evaluation-documents"}
    for name in ["envelope", *KINDS]:
        schema = load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == f"urn:docaudit:schema:{name}" and schema["description"]
        if name != "envelope":
            assert schema["allOf"] == [{"$ref": "urn:docaudit:schema:envelope"}]
            assert schema["properties"]["schema"]["properties"]["name"] == {"const": name}


OTHER = {"files": 0, "bytes": 0, "paths": []}


def _minimal(kind="cache-info", **changes) -> dict:
    results = {"root": "/tmp/c", "entries": 0, "bytes": 0, "kinds": {}, "models": {}, "other": OTHER}
    output = envelope(kind, results, command=["docaudit", "x"])
    return output | changes


def test_the_schemas_refuse_what_an_output_must_not_be():
    validate(_minimal(), "cache-info")
    record = {"path": "a.txt", "id": "a", "sha256": "0" * 64, "tokens_queried": 3, "tokens_total": None}
    model = {
        "id": "m",
        "identity": "local@00",
        "revision": None,
        "tokenizer_hash": "t",
        "backend": "transformers",
        "dtype": "float32",
        "quantization": None,
        "device": "cpu",
    }
    validate(_minimal(inputs=[record], model=model), "cache-info")
    bad = [
        _minimal(model=model | {"device": "auto"}),  # the device actually used, never `auto`
        _minimal(inputs=[record | {"sha256": "abc"}]),
        _minimal(inputs=[record | {"tokens_queried": -1}]),
        _minimal(created="2026-01-01T00:00:00+02:00"),  # UTC
        _minimal(command=[]),
        {k: v for k, v in _minimal().items() if k != "environment"},
        {k: v for k, v in _minimal().items() if k != "root"},  # the results' own fields
        _minimal(schema={"name": "cache-info", "version": "one"}),
    ]
    for output in bad:
        with pytest.raises(jsonschema.ValidationError):
            validator("cache-info").validate(output)
    row = {"file": "a.txt", "verdict": "inconclusive", "reason": "r", "p_value": 0.5, "q_value": 0.5}
    row |= {"p_value_blind": 0.5, "membership_score": 0.4, "n_tokens": 3, "n_tokens_total": 3, "alpha": 0.05}
    row |= {"classifier_auc": 0.6, "classifier_auc_ci_low": 0.5, "classifier_auc_ci_high": 0.7}
    row |= {"reason_codes": ["too_few_nonmembers"], "smallest_p": 1 / 31, "n_known_nonmembers": 30}
    validate(envelope("predict", [row]), "predict")
    with pytest.raises(jsonschema.ValidationError):  # a reason code outside the vocabulary
        validator("predict").validate(envelope("predict", [row | {"reason_codes": ["tired"]}]))
    with pytest.raises(jsonschema.ValidationError):  # the former two-element interval, without its bounds
        former = {k: v for k, v in row.items() if "ci_" not in k} | {"classifier_auc_ci": [0.5, 0.7]}
        validator("predict").validate(envelope("predict", [former]))
    assert former_bounds({"rows": [{"auc_lo": 1}], "pooled": {"auc": {"lo": 0, "hi": 1}}}) == [
        ".rows[].auc_lo",
        ".pooled.auc.lo",
        ".pooled.auc.hi",
    ]


def test_an_output_read_back_keeps_its_envelope():
    first = _minimal()
    assert envelope("cache-info", json.loads(json.dumps(first))) == first


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    return make_sets(tmp_path_factory.mktemp("schema_sets"))


def run_json(*args) -> dict:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_command_prints_and_writes_valid_outputs(sets, tiny_gpt2, tmp_path):
    seen = set()

    def check(output, kind):
        validate(output, kind)
        seen.add(kind)
        return output

    mem, non = sets["mem"], sets["non"]
    files = sorted([*mem.iterdir(), *non.iterdir()])
    check(run_json("data", "check", mem, non, "--folds", "2", "--format", "json"), "data-check")
    check(run_json("config", "show", "report", "--format", "json"), "config-show")
    check(run_json("cache", "info", "--format", "json"), "cache-info")

    score = check(
        run_json(
            "score", "--model", tiny_gpt2, "--context", "32", "--methods", "loss", "--raw", "--format", "json", mem
        ),
        "score",
    )
    # each document by the SHA-256 of the text queried (here the file's own text), the tokens queried, the model by
    # the device it ran on, the environment from the installed packages, the command as given
    assert [r["path"] for r in score["inputs"]] == [str(p) for p in sorted(mem.iterdir())]
    for record, row in zip(score["inputs"], score["rows"]):
        assert record["sha256"] == hashlib.sha256(Path(record["path"]).read_bytes()).hexdigest()
        assert record["tokens_queried"] == record["tokens_total"] == row["n_tokens"] > 0
    assert score["model"]["device"] == "cpu" and score["model"]["backend"] == "transformers"
    assert score["model"]["id"] == str(Path(tiny_gpt2).resolve()) and score["model"]["identity"].startswith("local@")
    assert score["environment"]["libraries"]["torch"] == metadata.version("torch")
    assert score["command"][:2] == ["docaudit", "score"] and score["command"][-1] == str(mem)
    assert score["seed"] == 0

    clf = tmp_path / "clf"
    card = check(run_json("train", "--members", mem, "--nonmembers", non, "--model", tiny_gpt2, *FAST, "--out", clf,
                          "--format", "json"), "train")  # fmt: skip
    assert {r["sha256"] for r in card["inputs"]} == {r["sha256"] for r in run_inputs(files, tiny_gpt2)}
    assert sorted(r["role"] for r in card["inputs"]) == ["member"] * 4 + ["non-member"] * 4
    assert all(r["tokens_total"] == r["tokens_queried"] > 0 for r in card["inputs"])  # whole documents queried
    grid = run_json("train", "--members", mem, "--nonmembers", non, "--model", tiny_gpt2, *FAST, "--grid",
                    "--grid-contexts", "16", "--format", "json")  # fmt: skip
    check(grid, "train")
    check(run_json("predict", "--classifier", clf, "--model", tiny_gpt2, "--format", "json", *files[:2]), "predict")

    ev = tmp_path / "ev"
    printed = check(run_json("evaluate", "--members", mem, "--nonmembers", non, "--model", tiny_gpt2, "--methods",
                             "loss", "--no-meta", "--folds", "2", "--sequences", "2", "--context", "32", "--out", ev,
                             "--format", "json"), "evaluation")  # fmt: skip
    written = check(read(ev / "evaluation.json"), "evaluation")
    assert printed["inputs"] == card["inputs"] and printed["model"] == card["model"]  # same documents, same model
    assert {k: v for k, v in written.items() if k not in ("created", "command")} == {
        k: v for k, v in printed.items() if k not in ("created", "command")
    }
    documents = check(read(ev / "documents.json"), "evaluation-documents")
    import pandas as pd

    assert list(pd.read_csv(ev / "documents.csv").columns) == list(documents["rows"][0])  # CSV columns = JSON row
    assert list(pd.read_csv(ev / "evaluation.csv").columns) == [
        k for k in printed["methods"][0] if k not in ("fold_aucs", "fold_n_test")
    ]

    sq = tmp_path / "sq"
    check(run_json("sequence", "--members", mem, "--nonmembers", non, "--model", tiny_gpt2, "--methods", "loss,mink",
                   "--resamples", "20", "--folds", "2", "--out", sq, "--format", "json"), "sequence")  # fmt: skip
    metrics = check(read(sq / "sequence_metrics.json"), "sequence")
    assert list(pd.read_csv(sq / "sequence_metrics.csv").columns) == list(metrics["metrics"][0])

    books = tmp_path / "books"
    for group, name in (("members", "cal_mem"), ("nonmembers", "cal_non"), ("nonmembers", "audit")):
        (books / name).mkdir(parents=True)
        ids = corpus_ids(group, 4)
        for book in ids[2:] if name == "audit" else ids[:2]:
            (books / name / f"{book}.txt").write_text(corpus_text(group, book, n_chars=1500))
    rep = tmp_path / "rep"
    report = check(run_json("report", books / "audit", "--calibrate-members", books / "cal_mem",
                            "--calibrate-nonmembers", books / "cal_non", "--model", tiny_gpt2, "--snippets", "4",
                            "--snippet-words", "40", "--out", rep, "--format", "json"), "report")  # fmt: skip
    assert check(read(rep / "report.json"), "report") == report
    assert sorted(r["role"] for r in report["inputs"]) == ["audited"] * 2 + ["member"] * 2 + ["non-member"] * 2
    # the CSV is the JSON's rows but the nested reasons (each code's sentence and next step: JSON only)
    assert list(pd.read_csv(rep / "report.csv").columns) == [k for k in report["books"][0] if k != "reasons"]

    check(run_json("dataset-test", mem, "--nonmembers", non, "--model", tiny_gpt2, "--context", "32",
                   "--methods", "loss,zlib", "--splits", "2", "--format", "json"), "dataset-test")  # fmt: skip
    # traps, lab, map and controls train their own targets, probe asks a server it starts, audit runs those, extract:
    # validated in their tests
    assert seen >= set(KINDS) - {"traps-make", "traps-detect", "lab", "map", "controls", "probe", "audit", "extract"}


def run_inputs(files, model) -> list[dict]:
    """The provenance records ``score`` gives for ``files`` (cleaned as every command cleans them)."""
    return run_json("score", "--model", model, "--context", "32", "--methods", "loss", "--format", "json", *files)[
        "inputs"
    ]


@pytest.mark.slow
def test_traps_and_lab_outputs_are_valid(tmp_path):
    generator = make_model(tmp_path / "generator", "llama")
    docs = tmp_path / "docs"
    docs.mkdir()
    for book in corpus_ids("members", 3):
        (docs / f"{book}.txt").write_text(corpus_text("members", book, n_chars=3000))
    reg = tmp_path / "private.json"
    made = run_json("traps", "make", docs, "--generator", generator, "--out", tmp_path / "publish", "--registry", reg,
                    "--trap-tokens", "4", "--traps-per-doc", "4", "--trap-copies", "3", "--jaccard", "0.5",
                    "--seed", "1", "--any-text", "--format", "json")  # fmt: skip
    validate(made, "traps-make")
    detected = run_json("traps", "detect", "--registry", reg, "--model", generator, "--format", "json")
    validate(detected, "traps-detect")
    assert detected["model"]["device"] == "cpu"

    pool = tmp_path / "pool"
    pool.mkdir()
    for book, text in excerpts(16, n_words=80).items():
        (pool / f"{book}.txt").write_text(text)
    out = tmp_path / "lab"
    args = ["--layers", "1", "--width", "32", "--heads", "2", "--positions", "64", "--vocab-size", "300"]
    args += ["--epochs", "1", "--doc-tokens", "64", "--folds", "2", "--methods", "loss"]
    with single_thread():
        printed = run_json("lab", "--corpus", pool, "--out", out, *args, "--format", "json")
    validate(printed, "lab")
    validate(read(out / "lab.json"), "lab")


def test_the_model_record_says_where_the_model_ran():
    from types import SimpleNamespace

    import torch

    from docaudit.config import ModelConfig
    from docaudit.provenance import model_record

    def record(**config):
        lm = SimpleNamespace(
            config=ModelConfig(**config), identity="x@0", tokenizer_hash="t", device=torch.device("cpu")
        )
        rec = model_record(lm)
        validator("cache-info").validate(_minimal(model=rec))
        return rec

    served = record(model=None, backend="openai", api_base="http://127.0.0.1:1/v1")
    assert served["device"] == "server" and served["dtype"] is None and served["quantization"] is None
    assert served["api_base"] == "http://127.0.0.1:1/v1"
    local = record(model="/m", dtype="bfloat16", quantize="int8")
    assert (local["device"], local["dtype"], local["quantization"]) == ("cpu", "bfloat16", "int8")
    assert record(model="/m.gguf", backend="llamacpp")["quantization"] == "gguf"


def test_a_card_with_the_former_interval_names_is_read_with_the_current_ones(tmp_path):
    """Cards written before the current names held ``lo``/``hi`` and a ``delta_ci`` pair: the shipped card, written
    back with the former names, reads as it is."""
    from docaudit.config import DEFAULT_CLASSIFIER
    from docaudit.methods.meta.persistence import read_card

    current = json.loads((DEFAULT_CLASSIFIER / "card.json").read_text(encoding="utf-8"))
    raw = json.loads(json.dumps(current))
    raw["pooled_bootstrap_95"] = {
        name: {"point": i["point"], "lo": i["ci_low"], "hi": i["ci_high"]}
        for name, i in current["pooled_bootstrap_95"].items()
    }
    beyond = raw["beyond_blind"]
    beyond["delta_ci"] = [beyond.pop("delta_ci_low"), beyond.pop("delta_ci_high")]
    path = tmp_path / "card.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    card = read_card(path)
    for name, interval in raw["pooled_bootstrap_95"].items():
        assert card["pooled_bootstrap_95"][name] == {
            "point": interval["point"],
            "ci_low": interval["lo"],
            "ci_high": interval["hi"],
        }
    beyond = card["beyond_blind"]
    assert [beyond["delta_ci_low"], beyond["delta_ci_high"]] == raw["beyond_blind"]["delta_ci"]
    assert card["pooled_bootstrap_95"] == current["pooled_bootstrap_95"]
    assert not former_bounds(card)
