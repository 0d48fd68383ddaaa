"""Simulated never-seen texts for the null simulations of the one-book tests: per-passage values of texts whose
values correlate along the text, read at the passages a layout places (``corpus.segments.stretch_starts``), so the
rules of ``controls`` and ``probe`` can be checked where the truth is known, with no model
(``scripts/nulls/null_geometry.py``, ``tests/test_geometry.py``).

A text of ``n`` units (tokens or words) has its own level (the spread between texts a member's shift must beat),
a latent value along it of one of the ``KINDS`` below, and independent noise per passage; a passage's value is
the level, the latent value at its start and its noise. Every latent kind is stationary (a random phase per
text), so a text's law does not depend on where a layout falls: the condition matched geometry rests on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from docaudit.corpus.segments import stretch_starts

KINDS = {
    "independent": "no latent value: passages independent within a text",
    "monotone": "a slow drift (an Ornstein-Uhlenbeck process, correlation exp(-d / scale) at distance d)",
    "periodic": "a sine of period scale at a random phase (chapters: values rise and fall with them)",
    "negative": "cells of scale units, each the difference of two independent draws, so neighbours correlate at -1/2",
    "openings": "chapters of scale units at a random phase, a passage that holds a chapter's opening raised by 2",
}


@dataclass(frozen=True)
class TextProcess:
    """How a simulated text's passage values behave: the latent ``kind`` (``KINDS``) over ``scale`` units, the
    standard deviations of the text's level, of the latent value and of a passage's noise, and the passage length
    in units (a passage holds a chapter's opening when one falls inside it)."""

    kind: str
    scale: float = 200.0
    level_sd: float = 0.5
    latent_sd: float = 1.0
    noise_sd: float = 1.0
    passage: int = 100

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")


def latent(process: TextProcess, starts, rng: np.random.Generator) -> np.ndarray:
    """The latent values of one text at ``starts`` (increasing), unit variance before ``latent_sd``."""
    s = np.asarray(starts, dtype=float)
    if process.kind == "independent" or s.size == 0:
        return np.zeros(s.size)
    if process.kind == "monotone":
        out = np.empty(s.size)
        out[0] = rng.standard_normal()
        for j in range(1, s.size):
            rho = np.exp(-(s[j] - s[j - 1]) / process.scale)
            out[j] = rho * out[j - 1] + np.sqrt(1 - rho * rho) * rng.standard_normal()
        return out * process.latent_sd
    phase = rng.random() * process.scale
    if process.kind == "periodic":
        return np.sqrt(2) * np.sin(2 * np.pi * (s + phase) / process.scale) * process.latent_sd
    if process.kind == "negative":
        cells = np.floor((s + phase) / process.scale).astype(int)
        draws = rng.standard_normal(cells.max() - cells.min() + 2)
        i = cells - cells.min() + 1
        return (draws[i] - draws[i - 1]) / np.sqrt(2) * process.latent_sd
    opening = np.ceil((s + phase) / process.scale) * process.scale - phase  # the first opening at or after a start
    return 2.0 * (opening < s + process.passage) * process.latent_sd


def text_values(
    process: TextProcess, n_units: int, layout: tuple[int, int], rng: np.random.Generator, shift: float = 0.0
) -> np.ndarray:
    """One simulated text of ``n_units`` units: its passage values in text order at the layout ``layout`` (the
    stretch width and the most passages, ``stretch_starts``), every value raised by ``shift`` (a member)."""
    width, count = layout
    starts = stretch_starts(n_units, process.passage, width, count, rng)
    level = process.level_sd * rng.standard_normal()
    noise = process.noise_sd * rng.standard_normal(len(starts))
    return level + latent(process, starts, rng) + noise + shift
