"""``docaudit audit``: the plan (what runs, what is skipped and why, the time before any model loads), the refusals
before any work (no test possible, a budget too small), the statement per book against Holm's definition through the
registry's extension point, the published power keyed by model, the JSON against its schema and the case file in a
real browser (no horizontal scroll at 1280 px or at A4's printable width, an A4 PDF)."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from conftest import CORPUS, corpus_ids, corpus_text
from test_cli import assert_clean_error, run
from test_schemas import validate, validator

from docaudit.api.audit import audit, plan_audit
from docaudit.api.audit_request import AuditRequest
from docaudit.api.audit_tests import AuditTest, Outcome, key
from docaudit.config import AuditConfig, ModelConfig
from docaudit.config.power import EMBEDDED, NOT_MEASURED, POWER, power_of
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, NO_EVIDENCE

audit_api = importlib.import_module("docaudit.api.audit")  # the module, not api.audit the function
BOOK = CORPUS / "members" / "1005.txt"
OTHER = CORPUS / "nonmembers" / "74346.txt"


def test_dry_run_plans_the_embedded_model_without_loading_it():
    result = run("audit", BOOK, "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "controls: runs, ~" in out and "predict: skipped, the classifier's own AUC 0.51" in out
    assert "map: skipped, no known non-members" in out and "--nonmembers DIR" in out
    assert "probe: skipped, no null library" in out and "traps: skipped, no trap registry" in out
    assert "estimated time: ~" in out and "nothing was loaded or written" in out


def test_a_target_no_test_supports_is_refused_in_one_line(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    result = run("audit", BOOK, "--model", model, "--out", tmp_path / "case")
    assert result.exit_code == 3
    assert_clean_error(result, "no test can run on this weights target")
    assert "figures only: docaudit extract BOOK gives them alone" in result.stderr
    for what in ("--classifier DIR", "--null-library DIR", "--nonmembers DIR", "--traps REGISTRY"):
        assert what in result.stderr
    assert not (tmp_path / "case").exists()
    chat = run("audit", BOOK, "--chat-only", "--api-base", "http://127.0.0.1:9/v1", "--api-model", "m")
    assert_clean_error(chat, "no test can run on this chat target")
    assert "controls needs the target to score given text" in chat.stderr


def test_a_budget_too_small_is_refused_before_any_work(tmp_path):
    result = run("audit", BOOK, "--budget", "0.1", "--out", tmp_path / "case")
    assert result.exit_code == 3
    assert_clean_error(result, "--budget 0.1 min is too small for any test: the quickest")
    assert not (tmp_path / "case").exists()


def test_the_budget_skips_what_does_not_fit(monkeypatch):
    fakes = {name: fake_test(name, {}, seconds) for name, seconds in (("slow", 600.0), ("quick", 30.0))}
    monkeypatch.setattr(audit_api, "TESTS", fakes)
    plan = plan_audit(AuditRequest([BOOK], config=AuditConfig(budget=2)))
    slow, quick = plan.tests
    assert not slow.runs and slow.why == "over the budget: needs ~10.0 min, 2.0 min left"
    assert quick.runs and plan.seconds == 30.0


MODEL = {"id": None, "identity": "fake@0123456789abcdef", "revision": None, "tokenizer_hash": "0" * 16,
         "backend": "transformers", "dtype": "float32", "quantization": None, "device": "cpu"}  # fmt: skip


def fake_test(name: str, p_values: dict, seconds: float = 1.0) -> AuditTest:
    """A test registered as another engineer would add one (extraction): fixed p-values per book."""

    def outcomes(_request):
        found = {
            key(path): Outcome(INCONCLUSIVE if p is None else NO_EVIDENCE, None, p, {"statistic": 1.5})
            for path, p in p_values.items()
        }
        return found, {"model": MODEL}

    return AuditTest(name, f"the {name} test", lambda r: None, lambda r: name, lambda q: seconds, outcomes)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """An audit of two real books through two registered tests with known p-values, written as a case file."""
    out = tmp_path_factory.mktemp("audit") / "case"
    fakes = {
        "first": fake_test("first", {BOOK: 0.001, OTHER: 0.03}),
        "second": fake_test("second", {BOOK: 0.5, OTHER: None}),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit_api, "TESTS", fakes)
        result = audit(AuditRequest([BOOK, OTHER], out=out))
    return out, result


def test_the_statement_is_holm_over_the_tests_run(case):
    _, result = case
    first, second = result.body["books"]
    # the first book: Holm over (0.001, 0.5) is (0.002, 0.5): evidence at 0.05
    assert first["verdict"] == EVIDENCE and first["p_value"] == pytest.approx(0.002) and first["tests_counted"] == 2
    assert [t["p_adjusted"] for t in first["tests"]] == pytest.approx([0.002, 0.5])
    # the second: 0.03 alone would be evidence, but the inconclusive test is counted: 2 x 0.03 = 0.06
    assert second["verdict"] == NO_EVIDENCE and second["p_value"] == pytest.approx(0.06)
    assert second["tests"][1]["p_value"] is None and second["tests"][1]["p_adjusted"] is None
    # no test named here was measured on any model: no number is shown
    assert all(t["power_words"] == NOT_MEASURED and t["power"] == [] for b in (first, second) for t in b["tests"])


def test_the_json_and_the_case_file(case):
    out, result = case
    written = json.loads((out / "audit.json").read_text())
    validate(written, "audit")
    validate(result.to_json(), "audit")
    for path, value in ((("verdict",), "member"), (("tests", 0, "p_adjusted"), 1.5), (("tests_counted",), -1)):
        bad = json.loads(json.dumps(written))
        where = bad["books"][0]
        for step in path[:-1]:
            where = where[step]
        where[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):  # the schema can fail: words and numbers out of range
            validator("audit").validate(bad)
    assert written["model"]["identity"] == "fake@0123456789abcdef"
    html = (out / "audit.html").read_text()
    # the statement and its plain words come first, then the tests, the plan, the provenance
    order = [html.index(s) for s in ("evidence of membership", "Each test for", "The plan", "Provenance")]
    assert order == sorted(order)
    assert "@page { size: A4" in html and "fake@0123456789abcdef" in html and written["created"] in html
    assert "<script" not in html and "<img" not in html  # self-contained: nothing fetched


def test_power_is_published_only_for_the_model_it_was_measured_on():
    controls = power_of("controls", EMBEDDED, {"generator": "target"})
    assert len(controls) == 1 and "found 14 of 20 books seen once in that training (95% 46–88%)" in controls[0].found
    assert power_of("controls", None, {"generator": "target"}) == []  # any other model: not measured
    assert power_of("map", EMBEDDED, {"method": "minkpp"}) == []
    assert all(p.source.startswith(("docs/", "models/")) for p in POWER)
    from docaudit.api.audit_tests import model_key

    assert model_key(ModelConfig()) == EMBEDDED and model_key(ModelConfig(model="gpt2")) is None
    assert model_key(ModelConfig(backend="openai", api_base="http://x/v1")) is None


def browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(browser() is None, reason="needs the Debian chromium package")
@pytest.mark.parametrize("width", [1280, 680])  # a screen, and A4's printable width (180 mm at 96 px per inch)
def test_the_case_file_fits_in_a_browser(case, tmp_path, width):
    out, _ = case
    page = tmp_path / "measured.html"
    measure = (
        "<script>window.addEventListener('load', () => { document.body.setAttribute('data-overflow', "
        "String(document.documentElement.scrollWidth - document.documentElement.clientWidth)); });</script>"
    )
    page.write_text((out / "audit.html").read_text().replace("</body>", measure + "</body>"))
    done = subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--window-size={width},1200",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    overflow = re.search(r'data-overflow="(-?\d+)"', done.stdout)
    assert overflow is not None, done.stderr[-2000:]
    assert int(overflow.group(1)) <= 0  # no horizontal scroll


@pytest.mark.skipif(browser() is None, reason="needs the Debian chromium package")
def test_the_case_file_prints_on_a4(case, tmp_path):
    out, _ = case
    pdf = tmp_path / "case.pdf"
    subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-pdf-header-footer",
         f"--user-data-dir={tmp_path / 'profile'}", f"--print-to-pdf={pdf}", (out / "audit.html").as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    boxes = re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", pdf.read_bytes())
    assert boxes and all(abs(float(w) - 595.3) < 2 and abs(float(h) - 841.9) < 2 for w, h in boxes)


@pytest.fixture(scope="module")
def mapped(tiny_gpt2, tmp_path_factory):
    """A real model and real books: one chaptered book judged, eight known non-members; only map can run."""
    from test_localize import lab_books

    root = tmp_path_factory.mktemp("mapped")
    for name, books in (("books", lab_books(1, 3, 320, skip=2)), ("calibration", lab_books(8, 3, 340, skip=4))):
        (root / name).mkdir()
        for i, book in enumerate(books):
            (root / name / f"{name}{i:02d}.txt").write_text("\n\n".join(book), encoding="utf-8")
    args = [root / "books", "--model", tiny_gpt2, "--alpha", "0.2", "--format", "json"]
    audited = run("audit", *args, "--nonmembers", root / "calibration", "--out", root / "case")
    mapped = run("map", *args, "--calibrate-nonmembers", root / "calibration")
    return audited, mapped, (root / "case" / "audit.html").read_text(encoding="utf-8")


@pytest.mark.slow  # about 10 s: a tiny model over nine books, twice
@pytest.mark.usefixtures("one_thread")
def test_a_real_map_enters_the_statement_as_bonferroni_over_its_segments(mapped):
    audited, mapped, html = mapped
    assert audited.exit_code == 0, audited.output
    assert "map: runs" in audited.stderr and "controls: skipped, no null library for this model" in audited.stderr
    out = json.loads(audited.stdout)
    validate(out, "audit")
    segments = json.loads(mapped.stdout)["rows"]
    judged = [s["p_value"] for s in segments if s["verdict"] != INCONCLUSIVE]
    [book] = out["books"]
    [test] = book["tests"]
    assert test["test"] == "map" and book["tests_counted"] == 1 and test["numbers"]["segments"] == len(segments)
    expected = min(1.0, len(segments) * min(judged))  # Bonferroni over the book's segments, written out
    assert test["p_value"] == pytest.approx(expected) and book["p_value"] == pytest.approx(expected)
    assert book["verdict"] == (EVIDENCE if expected <= 0.2 else NO_EVIDENCE)
    assert out["model"]["identity"].startswith("local@")
    assert "The chapter map" in html and all(f"{s['segment']}. {s['name']}" in html for s in segments)


def test_what_the_user_gives_plans_more_tests(tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    for book in corpus_ids("nonmembers", 3):
        (library / f"{book}.txt").write_text(corpus_text("nonmembers", book, n_chars=20000), encoding="utf-8")
    result = run("audit", BOOK, "--null-library", library, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "controls: runs, ~" in result.stdout and "probe: runs, ~" in result.stdout
    assert_clean_error(run("audit", BOOK, "--chat-only", "--null-library", library), "--chat-only needs the server")
    chat = run("audit", BOOK, "--chat-only", "--null-library", library, "--api-base", "http://127.0.0.1:9/v1",
               "--api-model", "m", "--dry-run")  # fmt: skip
    assert chat.exit_code == 0, chat.output
    assert "probe: runs" in chat.stdout and "controls: skipped, needs the target to score given text" in chat.stdout
    bad = tmp_path / "registry.json"
    bad.write_text('{"format": 0}')
    assert_clean_error(run("audit", BOOK, "--traps", bad, "--dry-run"), "not a docaudit trap registry")
    assert_clean_error(run("audit", BOOK, "--nonmembers", tmp_path / "missing", "--dry-run"), "missing")


def test_a_test_that_refuses_its_input_is_counted_as_inconclusive_and_a_missing_model_stops_the_run(monkeypatch):
    from docaudit.errors import DocauditError, ModelError

    def refusing(error):
        def outcomes(_request):
            raise error

        return AuditTest("refusing", "a test that refuses", lambda r: None, lambda r: None, lambda q: 1.0, outcomes)

    fakes = {"first": fake_test("first", {BOOK: 0.03}), "refusing": refusing(DocauditError("its input is refused"))}
    monkeypatch.setattr(audit_api, "TESTS", fakes)
    [book] = audit(AuditRequest([BOOK])).body["books"]
    assert book["tests_counted"] == 2 and book["verdict"] == NO_EVIDENCE and book["p_value"] == pytest.approx(0.06)
    refused = book["tests"][1]
    assert refused["verdict"] == INCONCLUSIVE and refused["reason"] == "failed: its input is refused"
    monkeypatch.setattr(audit_api, "TESTS", {"refusing": refusing(ModelError("no such model"))})
    with pytest.raises(ModelError):
        audit(AuditRequest([BOOK]))


def test_the_command_line_prints_the_plan_then_csv_or_json(monkeypatch):
    import io

    import pandas as pd

    monkeypatch.setattr(audit_api, "TESTS", {"first": fake_test("first", {BOOK: 0.01}, seconds=90.0)})
    csv = run("audit", BOOK, "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert "first: runs, ~1.5 min" in csv.stderr and "estimated time: ~1.5 min" in csv.stderr  # the plan on stderr
    [row] = pd.read_csv(io.StringIO(csv.stdout)).to_dict(orient="records")
    assert row["statement"] == EVIDENCE and row["test"] == "first" and row["p_adjusted"] == pytest.approx(0.01)
    assert row["power"] == NOT_MEASURED and row["statistic"] == 1.5
    printed = run("audit", BOOK, "--format", "json")
    validate(json.loads(printed.stdout), "audit")


def registry(path: Path, name: str) -> Path:
    """A trap registry naming one document ``name`` (its sequences made up: only the plan reads it here)."""
    from docaudit.corpus.traps import TrappedDocument, TrapRegistry, TrapSequence

    traps = [TrapSequence(f"trap {i}", [1, 2, 3], 5.0, [10 * i]) for i in range(4)]
    controls = [TrapSequence(f"control {i}", [4, 5], 5.0) for i in range(4)]
    entry = TrappedDocument(name, f"src/{name}.txt", "0" * 64, f"out/{name}.txt", "1" * 64, traps, controls)
    path.write_text(json.dumps(TrapRegistry({"identity": "g@0"}, 0, {}, [entry]).as_json()), encoding="utf-8")
    return path


def test_traps_run_only_for_a_book_the_registry_names(tmp_path):
    named = run("audit", BOOK, "--traps", registry(tmp_path / "named.json", "1005"), "--dry-run")
    assert named.exit_code == 0, named.output
    assert "traps: runs, ~" in named.stdout
    other = run("audit", BOOK, "--traps", registry(tmp_path / "other.json", "74346"), "--dry-run")
    assert "traps: skipped, the trap registry holds none of these books" in other.stdout


@pytest.mark.usefixtures("one_thread")
def test_extraction_is_shown_beside_the_statement_and_not_counted(tiny_gpt2, tmp_path, monkeypatch):
    """The registered extraction reads the book's first --extract-tokens tokens, gives the extract command's own
    figures for them, and leaves the statement to the tests with p-values; the case file quotes what it found."""
    from docaudit.api.audit_tests import TESTS
    from docaudit.api.extract import ExtractRequest, extract_books
    from docaudit.config import ExtractConfig

    book = tmp_path / "book.txt"
    book.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=4000), encoding="utf-8")
    fakes = {"first": fake_test("first", {book: 0.02}), "extract": TESTS["extract"]}
    monkeypatch.setattr(audit_api, "TESTS", fakes)
    model = ModelConfig(model=str(tiny_gpt2), device="cpu")
    request = AuditRequest([book], model, config=AuditConfig(extract_tokens=300), out=tmp_path / "case")
    [planned] = [t for t in plan_audit(request).tests if t.name == "extract"]
    assert planned.runs and planned.seconds > 0
    [said] = audit(request).body["books"]
    assert said["tests_counted"] == 1 and [t["test"] for t in said["tests"]] == ["first"]
    assert said["p_value"] == pytest.approx(0.02) and said["verdict"] == EVIDENCE
    figures = said["figures"]["extract"]
    [alone] = extract_books(ExtractRequest([book], model, config=ExtractConfig(first_tokens=300))).books
    assert figures["first_tokens"] == alone.tokens == 300
    assert figures["extractable_share"] == alone.extractable_share and figures["max_pz"] == alone.max_pz
    assert figures["baseline"] is None
    written = json.loads((tmp_path / "case" / "audit.json").read_text(encoding="utf-8"))
    validate(written, "audit")
    html = (tmp_path / "case" / "audit.html").read_text(encoding="utf-8")
    assert "What the model writes back" in html and "of the first 300 tokens" in html
    assert "no never-seen texts to compare with" in html
