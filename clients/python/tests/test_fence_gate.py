"""FenceGate: admits equal and higher fences, refuses lower ones."""

from __future__ import annotations

import threading

import pytest

from dagnats_leases import FenceGate, StaleFence


def test_equal_and_higher_fences_are_admitted_and_a_lower_one_refused() -> None:
    gate = FenceGate()
    gate.admit(42)
    gate.admit(42)
    gate.admit(50)
    with pytest.raises(StaleFence) as caught:
        gate.admit(45)
    assert (caught.value.fence, caught.value.highest) == (45, 50)
    assert gate.highest == 50


def test_fences_compare_as_numbers_not_text() -> None:
    gate = FenceGate()
    gate.admit(9)
    gate.admit(10)
    with pytest.raises(StaleFence):
        gate.admit(9)


def test_a_fence_that_is_not_a_revision_is_a_value_error() -> None:
    gate = FenceGate()
    for bad in (-1, "10", 1.5, True):
        with pytest.raises(ValueError):
            gate.admit(bad)  # type: ignore[arg-type]


def test_concurrent_writers_never_lower_the_highest_fence() -> None:
    gate = FenceGate()

    def write(offset: int) -> None:
        for f in range(2000):
            try:
                gate.admit(f * 8 + offset)
            except StaleFence:
                pass

    threads = [threading.Thread(target=write, args=(t,)) for t in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert gate.highest == 1999 * 8 + 8
