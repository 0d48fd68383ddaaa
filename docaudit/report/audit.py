"""What ``audit`` prints and writes: the plan (a line per test, run or skipped and why, with the estimated time),
per book the statement first, then each test's verdict, numbers and what the project measured of its power; with
``--out``, ``audit.json`` and the case file ``audit.html`` (``templates/audit.html``, printable on A4)."""

from __future__ import annotations

from pathlib import Path

PLAIN = {
    "evidence of membership": "The tests run give evidence that the model was trained on this book: for a book the "
    "model never saw, the chance of this statement is at most {alpha}, given each test's own assumptions (its null, "
    "in docs/methods.md).",
    "no evidence of membership": "The tests run found no evidence that the model was trained on this book. This is "
    "not evidence that it was not: see what each test could find on this model, beside it.",
    "inconclusive": "No test run could give a valid answer for this book (see each test's reason).",
}


def duration(seconds: float | None) -> str:
    """``~3.5 min`` (``?`` when unknown)."""
    if seconds is None:
        return "time unknown"
    return f"~{seconds:.0f} s" if seconds < 60 else f"~{seconds / 60:.1f} min"


def plan_lines(plan: list[dict], kind: str, seconds: float | None) -> list[str]:
    """One line per test, run or skipped and why, then the estimated time of the run."""
    lines = [f"audit plan for a target of kind {kind}:"]
    for t in plan:
        if t["runs"]:
            lines.append(f"  {t['test']}: runs, {duration(t['estimated_seconds'])}")
        else:
            lines.append(f"  {t['test']}: skipped, {t['why']}")
    lines.append(f"estimated time: {duration(seconds)} (each test's own estimate, first model load included)")
    return lines


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def numbers_text(numbers: dict) -> str:
    """``name value`` pairs of a test's numbers, those it has; ``NAME_ci_low`` and ``NAME_ci_high`` as the 95%
    interval beside ``NAME``."""
    shown = []
    for k, v in numbers.items():
        if v is None or k.endswith(("_ci_low", "_ci_high")):
            continue
        low, high = numbers.get(f"{k}_ci_low"), numbers.get(f"{k}_ci_high")
        interval = f" (95% {_number(low)} to {_number(high)})" if low is not None and high is not None else ""
        shown.append(f"{k.replace('_', ' ')} {_number(v)}{interval}")
    return ", ".join(shown)


def extraction_words(figures: dict) -> str:
    """What the model writes back of the book, beside the never-seen texts put through the same way: its p_z
    figures over the book's opening, or (a model that only writes) its continuations of the book's passages."""
    if figures.get("reason"):
        return figures["reason"]
    if figures.get("mode") == "continuation":
        said = (
            f"continuing {figures['passages_continued']} passages of the book, the model wrote back a common run of "
            f"at least {figures['long_match_words']} words in {figures['long_matches']} "
            f"({100 * figures['long_match_share']:.1f}%), longest {figures['longest_match_words']} words, "
            f"mean word recall {100 * figures['mean_recall']:.1f}%"
        )
    else:
        tries = "in one try" if figures["n"] == 1 else f"in {figures['n']} tries"
        said = (
            f"{100 * figures['extractable_share']:.1f}% of the first {figures['first_tokens']:,} tokens lie in a "
            f"suffix the model writes verbatim {tries} with probability at least {figures['p']:g} (greedy: "
            f"{100 * figures['greedy_share']:.1f}%), longest run {figures['longest_run_tokens']} tokens"
        )
    base = figures.get("baseline")
    if base is None:
        return said + "; no never-seen texts to compare with (--null-library DIR)"
    return (
        f"{said}; never-seen texts: median {100 * base['median_share']:.1f}%, max {100 * base['max_share']:.1f}%, "
        f"{base['at_or_above']} of {base['texts']} at or above the book"
    )


def quoted_passages(figures: dict) -> list[dict]:
    """The passages shown under the extraction figures: where each lies in the book, and its text."""
    if figures.get("mode") == "continuation":
        return [{"where": f"characters {q['continuation_start']:,}–{q['char_end']:,}", "text": q["match"]}
                for q in figures.get("passages") or []]  # fmt: skip
    return [{"where": f"tokens {q['token_start']:,}–{q['token_end']:,}", "text": q["text"]}
            for q in figures.get("passages") or []]  # fmt: skip


def format_audit(body: dict) -> str:
    """The terminal text: per book the statement first, then each test."""
    lines = []
    for book in body["books"]:
        name = book["id"] + (f" ({book['title']})" if book.get("title") else "")
        p = "" if book["p_value"] is None else f", p = {_number(book['p_value'])}"
        lines.append(f"{name}: {book['verdict']}{p} ({book['tests_counted']} test(s), level {body['alpha']:g})")
        for t in book["tests"]:
            p = "p not counted (inconclusive)" if t["p_value"] is None else f"p = {_number(t['p_value'])}"
            held = "" if t["p_adjusted"] is None else f", Holm-adjusted {_number(t['p_adjusted'])}"
            reason = f": {t['reason']}" if t["reason"] else ""
            lines.append(f"  {t['test']}: {t['verdict']}{reason}; {p}{held}")
            if t["numbers"]:
                lines.append(f"    {numbers_text(t['numbers'])}")
            lines.append(f"    what it finds on this model: {t['power_words']}")
        extract = book.get("figures", {}).get("extract")
        if extract is not None:
            lines.append(f"  extract (figures, not in the statement): {extraction_words(extract)}")
            if extract.get("power_words"):
                lines.append(f"    what it finds on this model: {extract['power_words']}")
    lines.append(f"the statement: {body['combination']}")
    return "\n".join(lines)


def page_values(envelope: dict) -> dict:
    """What ``templates/audit.html`` shows."""
    books = []
    for book in envelope["books"]:
        ran = ", ".join(t["test"] for t in book["tests"]) or "none"
        skipped = ", ".join(t["test"] for t in envelope["plan"] if not t["runs"])
        plain = PLAIN[book["verdict"]].format(alpha=envelope["alpha"]) + f" Tests run: {ran}."
        plain += f" Not run: {skipped} (see the plan for why)." if skipped else ""
        extract = book.get("figures", {}).get("extract")
        written = (
            None
            if extract is None
            else {**extract, "words": extraction_words(extract), "quoted": quoted_passages(extract)}
        )
        books.append({**book, "plain": plain, "css": book["verdict"].split()[0], "extract": written})
    segments = [
        row
        for row in (envelope["tests"].get("map") or {}).get("segments", [])
        if isinstance(row, dict) and "verdict" in row
    ]
    model = envelope.get("model") or {}
    environment = envelope.get("environment") or {}
    provenance = [
        ("docaudit", envelope["docaudit_version"]),
        ("command", " ".join(envelope["command"]) if isinstance(envelope["command"], list) else envelope["command"]),
        ("created", envelope["created"]),
        ("model identity", model.get("identity") or model.get("id") or "not loaded"),
        ("tokenizer hash", model.get("tokenizer_hash") or "-"),
        ("backend, device", f"{model.get('backend') or '-'}, {model.get('device') or '-'}"),
        ("seed", envelope["seed"]),
        ("level", envelope["alpha"]),
        ("budget (minutes)", envelope["budget_minutes"] if envelope["budget_minutes"] is not None else "none"),
        ("python, platform", f"{environment.get('python')}, {environment.get('platform')}"),
        ("libraries", ", ".join(f"{k} {v}" for k, v in (environment.get("libraries") or {}).items())),
    ]
    for name, output in envelope["tests"].items():
        if isinstance(output, dict) and output.get("settings"):
            provenance.append((f"settings of {name}", numbers_text(output["settings"])))
        elif isinstance(output, dict) and output.get("error"):
            provenance.append((f"{name} failed", output["error"]))
    return {
        "books": books,
        "plan": envelope["plan"],
        "segments": segments,
        "combination": envelope["combination"],
        "provenance": provenance,
        "inputs": envelope.get("inputs") or [],
        "number": _number,
        "numbers_text": numbers_text,
        "duration": duration,
    }


def write_audit(envelope: dict, out: Path, overwrite: bool = False) -> None:
    """``audit.json`` and the self-contained case file ``audit.html`` into ``out``, written whole or not at all."""
    from docaudit.io import json_text
    from docaudit.outputs import staged_dir
    from docaudit.report.pages import render_page

    with staged_dir(Path(out), "audit", overwrite) as tmp:
        (tmp / "audit.json").write_text(json_text(envelope), encoding="utf-8")
        (tmp / "audit.html").write_text(render_page("audit.html", **page_values(envelope)), encoding="utf-8")
