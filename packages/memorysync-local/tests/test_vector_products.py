"""Concurrent recalls of one user share one matrix product (``vector_index._Products``)."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from memorysync_local._recall.vector_index import _Products, _Ticket  # noqa: E402

KEY = ("local", "ana")


def _unit_rows(rows: int, dims: int, seed: int) -> object:
    matrix = np.random.default_rng(seed).normal(size=(rows, dims)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_probes_queued_during_a_product_go_together_and_get_their_own_cosines() -> None:
    matrix = _unit_rows(5000, 128, seed=1)
    probes = list(_unit_rows(4, 128, seed=2))
    products = _Products()
    # Three recalls already queued behind a product: the next caller leads them.
    queued = [_Ticket(matrix, probe) for probe in probes[1:]]
    products._queues[KEY] = list(queued)
    mine = products.cosines(KEY, matrix, probes[0])
    assert products.shared == 4
    for ticket, probe in zip([None, *queued], probes, strict=True):
        got = mine if ticket is None else ticket.cosines
        if ticket is not None:
            assert ticket.ready.is_set()
        np.testing.assert_allclose(got, matrix @ probe, rtol=1e-5, atol=1e-6)
    assert KEY not in products._leading
    assert KEY not in products._queues


def test_a_probe_against_a_longer_view_is_not_mixed_with_shorter_ones() -> None:
    matrix = _unit_rows(300, 16, seed=3)
    probe, other = _unit_rows(2, 16, seed=4)
    products = _Products()
    longer = _Ticket(matrix, other)
    products._queues[KEY] = [longer]
    mine = products.cosines(KEY, matrix[:200], probe)
    assert mine.shape == (200,)
    assert longer.cosines.shape == (300,)
    np.testing.assert_allclose(longer.cosines, matrix @ other, rtol=1e-5, atol=1e-6)


def test_a_probe_arriving_during_a_product_is_handed_the_lead_of_the_next() -> None:
    matrix = _unit_rows(100, 8, seed=5)
    probe, late = _unit_rows(2, 8, seed=6)
    arrived = _Ticket(matrix, late)

    class Products(_Products):
        def _multiply(self, batch: list[_Ticket]) -> None:
            # A recall arrives while this product runs: it queues behind it.
            with self._lock:
                self._queues.setdefault(KEY, []).append(arrived)
            super()._multiply(batch)

    products = Products()
    mine = products.cosines(KEY, matrix, probe)
    np.testing.assert_allclose(mine, matrix @ probe, rtol=1e-5, atol=1e-6)
    # Woken with no answer and the lead still taken: it leads the next product.
    assert arrived.ready.is_set()
    assert arrived.cosines is None
    assert arrived.error is None
    assert KEY in products._leading
    assert products._queues[KEY] == [arrived]
