"""The seed of a run: its default and the help ``--seed`` shows in each command.

A command has one seed, ``docaudit.run.RunContext.seed`` (``--seed``, or ``seed = N`` in a ``--config`` file);
every random choice draws its own stream from it (``docaudit.seeds.stream``). No settings group carries a seed of
its own; where an output records one (``query.used(seed)``, a classifier card's ``meta.seed``), it is the run's."""

from __future__ import annotations

SEED = 0
MAX_SEED = 2**32 - 1  # the largest seed every library docaudit seeds takes (scikit-learn's random_state)

# What ``--seed`` seeds, as each command's help says it, with the help section it is listed in
SEED_HELP = {
    "run": ("Seed of every random choice the command makes.", "method"),
    "detector": ("Seed of the augmentations (PAC, neighbours).", "method"),
    "controls": ("Seed of the passage choice and the generation.", "method"),
    "probe": ("Seed of the passage choice, the sampling and the null's passage subsets.", "method"),
    "extract": ("--mode continuation: seed of the passage choice and the sampling.", "method"),
    "traps": ("Seed of the trap generation and placement.", "traps"),
}


def with_seed(settings: dict, seed: int, after: str) -> dict:
    """``settings`` (a group's fields, as written into an output or a key) with ``"seed": seed`` right after the
    key ``after``: where the seed stood when it was a field of that group, so the outputs and cache keys of a
    given seed are unchanged."""
    out = {}
    for name, value in settings.items():
        out[name] = value
        if name == after:
            out["seed"] = seed
    return out
