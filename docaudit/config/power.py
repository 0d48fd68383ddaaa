"""What "no evidence of membership" is worth: the power of each test as the project measured it, keyed by the
model it was measured on and the setting that decides it. Every number here is copied from a published
measurement (docs/methods.md, docs/study.md, docs/traps.md); a test on a model with
no row is "not measured for this model", never given another model's number."""

from __future__ import annotations

from dataclasses import dataclass

EMBEDDED = "embedded"  # the model key of the embedded Gemma-3-270M (``ModelConfig.model`` None)
NOT_MEASURED = "not measured for this model"


@dataclass(frozen=True)
class Power:
    """One published measurement: ``test`` on ``model`` (a model key), at ``setting`` (the planned setting's
    values that must match, e.g. the generator's role), ``found`` in plain words, what was measured
    (``measured_on``) and where it is published (``source``)."""

    test: str
    model: str
    setting: tuple[tuple[str, str], ...]
    found: str
    measured_on: str
    source: str


POWER = (
    Power(
        "controls",
        EMBEDDED,
        (("generator", "target"),),
        "on this model trained further, it found 14 of 20 books seen once in that training (95% 46–88%) and flagged 1 "
        "of 20 never-seen books, at 10 passages of 8+8+16 tokens laid out by the former rule (other settings than "
        "audit's 16 passages of 32+32+32 tokens, which were not measured); a book seen once in pretraining leaves far "
        "less (not measured)",
        "the embedded Gemma-3-270M trained further for one epoch on 300-word excerpts of 20 PG-19 books (each seen "
        "once, AdamW at 2e-4), the target as its own generator, 10 passages of 8+8+16 tokens, 3 suffixes, a library "
        "of 20 never-trained texts; a book seen once among a pretraining run's trillions of tokens leaves far less",
        "docs/methods.md, Paired synthetic controls, On ground truth at Gemma scale",
    ),
    Power(
        "controls",
        EMBEDDED,
        (("generator", "base"),),
        "on this model trained further, with the untrained model as generator, it found 19 of 20 books seen once in "
        "that training (95% 75–100%) and flagged 1 of 20 never-seen books, at 10 passages of 8+8+16 tokens laid out by "
        "the former rule (other settings than audit's, which were not measured)",
        "the embedded Gemma-3-270M trained further for one epoch on 300-word excerpts of 20 PG-19 books (each seen "
        "once, AdamW at 2e-4), the untrained Gemma as generator, 10 passages of 8+8+16 tokens, 3 suffixes, a library "
        "of 20 never-trained texts",
        "docs/methods.md, Paired synthetic controls, On ground truth at Gemma scale",
    ),
    Power(
        "controls",
        EMBEDDED,
        (("generator", "base"),),
        "on this model trained further at the dose-response study's learning rate, with the untrained model as "
        "generator, each book judged alone: 6 of 10 books seen once, 9 of 10 seen twice, 10 of 10 seen five and ten "
        "times at p ≤ 0.05, 0 of 10 never-seen books, at the default preset on 3,000-word excerpts (about 10 "
        "passages each; audit's fast preset was not measured)",
        "the embedded Gemma-3-270M trained further on 3,000-word excerpts of 40 books posted after September 2024 "
        "(10 each seen 1, 2, 5 and 10 times, AdamW at 5e-5), the untrained Gemma as generator, the default preset, a "
        "library of 30 never-trained excerpts",
        "docs/methods.md, Extraction, On the embedded Gemma trained further",
    ),
    Power(
        "extract",
        EMBEDDED,
        (("mode", "pz"),),
        "on this model trained further, none of 30 books seen 1, 2 or 5 times had a 50-token suffix it writes back "
        "with probability at least 0.001, though Min-K%++ and controls told them apart; 9 of 10 seen ten times did "
        "(60% of their tokens on average); no example of 40 never-seen books did: no extraction says nothing about "
        "training",
        "the embedded Gemma-3-270M trained further on 3,000-word excerpts of 40 books posted after September 2024 "
        "(10 each seen 1, 2, 5 and 10 times, AdamW at 5e-5), extract's defaults (50/50/10, top-40, (1, 0.001))",
        "docs/methods.md, Extraction, On the embedded Gemma trained further",
    ),
    Power(
        "predict",
        EMBEDDED,
        (),
        "on this model trained further, a classifier trained on 44 known non-members separated books seen once with "
        "AUC 0.96–1.00 yet gave evidence of membership to none: a book needs at least 40 known non-members",
        "the embedded Gemma-3-270M trained further on 44 books (seen 1–10 times, 512 tokens, learning rate 5e-5)",
        "docs/study.md, Results and What it means for a user",
    ),
    Power(
        "probe",
        EMBEDDED,
        (("probe", "ngram"),),
        "on this model trained further, it found 0 of 20 books seen once (AUC 0.50) and 15 of 20 seen three times, "
        "judged alone, with 1 of 20 never-seen books flagged",
        "the embedded Gemma-3-270M trained further on 150-word excerpts of 20 PG-19 books, served over HTTP, probed "
        "against 20 never-trained excerpts",
        "docs/methods.md, Generation-only probes",
    ),
    Power(
        "traps",
        EMBEDDED,
        (),
        "on this model trained further, it found 2 of 2 trapped documents whose traps were each seen 20 times "
        "(p = 0.004) and 0 of 2 never-trained ones: four documents show it works end to end, not how often it does",
        "the embedded Gemma-3-270M continued-pretrained on 4 trapped 128-token excerpts, 2 epochs at 2e-4",
        "docs/traps.md, Measured: the embedded Gemma continued-pretrained on trapped excerpts",
    ),
)


def power_of(test: str, model: str | None, setting: dict[str, str]) -> list[Power]:
    """The measurements of ``test`` on the model keyed ``model`` (None: a model with no key) whose setting matches
    ``setting``; empty when none applies (then :data:`NOT_MEASURED`)."""
    return [p for p in POWER if p.test == test and p.model == model and all(setting.get(k) == v for k, v in p.setting)]
