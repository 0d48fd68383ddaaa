"""The named random streams: each is the generator docaudit always drew for its purpose, and streams differ."""

import numpy as np
import pytest

from docaudit.seeds import STREAMS, stream

# the generator each random choice was seeded with before the streams were named
BEFORE = {
    "bootstrap": lambda s: np.random.default_rng(s),
    "calibration_bootstrap": lambda s: np.random.default_rng([s, 7]),
    "snippets": lambda s: np.random.default_rng([s, 0xABCDEF012345]),
    "rate_reference": lambda s: np.random.default_rng([s, 33, 12]),
    "rate_subsample": lambda s: np.random.default_rng([s, 34, 12, 3]),
    "excerpt": lambda s: np.random.default_rng([s, 0xABCDEF012345]),
    "sequences": lambda s: np.random.default_rng([s, 0xABCDEF012345]),
    "pac_swaps": lambda s: np.random.default_rng([s, 2, 991]),
    "neighbour_masks": lambda s: np.random.default_rng([s, 2, 991]),
    "recall_shots": lambda s: np.random.default_rng(s),
    "dataset_splits": lambda s: np.random.default_rng(s),
    "dataset_sizes": lambda s: np.random.default_rng([s, 1]),
    "permutation": lambda s: np.random.default_rng(s),
    "traps": lambda s: np.random.default_rng(s),
    "controls_passages": lambda s: np.random.default_rng(s),
    "probe_passages": lambda s: np.random.default_rng([s, 51, 12]),
    "probe_null": lambda s: np.random.default_rng([s, 52, 12]),
    "extract_continuation": lambda s: np.random.default_rng([s, 62, 12]),
    "library_rank": lambda s: np.random.default_rng([s, 36]),
    "lab_subset": lambda s: np.random.default_rng(s),
    "lab_split": lambda s: np.random.default_rng(s),
    "continuations": lambda s: np.random.default_rng([s, 35, 2, 1]),
    "served_seeds": lambda s: np.random.default_rng([s, 61, 2, 1]),
}
KEYS = {
    "snippets": (0xABCDEF012345,),
    "excerpt": (0xABCDEF012345,),
    "sequences": (0xABCDEF012345,),
    "rate_reference": (12,),
    "rate_subsample": (12, 3),
    "probe_passages": (12,),
    "probe_null": (12,),
    "extract_continuation": (12,),
    "pac_swaps": (2, 991),
    "neighbour_masks": (2, 991),
    "continuations": (2, 1),
    "served_seeds": (2, 1),
}


def test_every_stream_is_documented_and_checked():
    assert set(STREAMS) == set(BEFORE)
    assert all(s.purpose for s in STREAMS.values())


@pytest.mark.parametrize("name", sorted(BEFORE))
@pytest.mark.parametrize("seed", [0, 3, 2**40 + 5])
def test_a_stream_draws_what_its_choice_always_drew(name, seed):
    assert np.array_equal(stream(seed, name, *KEYS.get(name, ())).random(8), BEFORE[name](seed).random(8))


def test_streams_with_other_tags_or_seeds_differ():
    draws = {
        name: stream(3, name).random(4).tobytes() for name in ("bootstrap", "calibration_bootstrap", "dataset_sizes")
    }
    assert len(set(draws.values())) == 3
    assert not np.array_equal(stream(3, "bootstrap").random(4), stream(4, "bootstrap").random(4))


def test_an_unknown_stream_is_refused():
    with pytest.raises(KeyError):
        stream(0, "no such stream")
