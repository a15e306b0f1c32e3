"""opgen.bench: how short GPU calls are sampled, so their medians are not a clock tick apart."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from opgen.bench import MAX_CALLS_PER_SAMPLE, SAMPLE_SPAN_MS, calls_per_sample, median_of_sample_means


@pytest.mark.parametrize(
    ("call_ms", "expected"),
    [
        (0.005, MAX_CALLS_PER_SAMPLE),  # 5 µs: capped
        (0.02, 5),  # 5 calls span 0.1 ms
        (0.03, 4),  # rounded up: 3 calls would span only 0.09 ms
        (SAMPLE_SPAN_MS, 1),
        (2.0, 1),
        (0.0, MAX_CALLS_PER_SAMPLE),  # a call too short for the clock to see
    ],
)
def test_calls_per_sample(call_ms: float, expected: int) -> None:
    assert calls_per_sample(call_ms) == expected


def test_sample_means_recover_a_call_shorter_than_the_clock_resolves() -> None:
    # A 5.3 µs call timed by a clock that ticks every 0.5 µs, starting at a random phase, reads
    # 5.0 or 5.5; the median of single readings is one of the two, the mean of many is 5.3.
    tick, true_ms = 0.0005, 0.0053
    rng = random.Random(0)
    readings = []
    for _ in range(50 * MAX_CALLS_PER_SAMPLE):
        start = rng.uniform(0, 100)
        readings.append((math.floor((start + true_ms) / tick) - math.floor(start / tick)) * tick)
    assert {round(r, 6) for r in readings} == {0.005, 0.0055}
    assert round(statistics.median(readings), 6) in {0.005, 0.0055}  # 0.2-0.3 µs off
    assert median_of_sample_means(readings, calls_per_sample(true_ms)) == pytest.approx(true_ms, abs=0.00005)


def test_median_of_sample_means_groups_consecutive_calls_and_drops_a_partial_last_sample() -> None:
    assert median_of_sample_means([1.0, 3.0, 2.0, 2.0, 10.0, 12.0, 100.0], 2) == 2.0
    assert median_of_sample_means([4.0, 1.0, 9.0], 1) == 4.0
