"""How the fast encoder groups length-sorted texts into batches (issue 27: at most ``BATCH_TOKENS`` positions)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.thematic.embed import BATCH_SIZE, BATCH_TOKENS, batch_bounds


def test_without_a_position_limit_the_batches_are_the_plain_fixed_size_slices() -> None:
    lengths = np.sort(np.random.default_rng(0).integers(1, 257, 1000))
    plain = [(s, min(s + BATCH_SIZE, len(lengths))) for s in range(0, len(lengths), BATCH_SIZE)]
    assert batch_bounds(lengths, BATCH_SIZE, 0) == plain
    assert batch_bounds(lengths[:0], BATCH_SIZE, BATCH_TOKENS) == []


@pytest.mark.parametrize("seed", range(5))
def test_batches_cover_every_text_once_in_order_within_both_limits_and_are_greedy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.integers(1, 300, int(rng.integers(1, 700))))
    bounds = batch_bounds(lengths, BATCH_SIZE, BATCH_TOKENS)
    assert [b[0] for b in bounds] == [0] + [b[1] for b in bounds[:-1]] and bounds[-1][1] == len(lengths)
    for start, end in bounds:
        n = end - start
        assert 1 <= n <= BATCH_SIZE
        # the longest (last) text times the count fits, unless the batch is one text that alone is longer
        assert n == 1 or n * lengths[end - 1] <= BATCH_TOKENS
        # greedy: one more text would break a limit
        if end < len(lengths):
            assert n == BATCH_SIZE or (n + 1) * lengths[end] > BATCH_TOKENS
