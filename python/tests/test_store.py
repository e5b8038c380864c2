"""Store: add/remove/get/slots/bias, search against float64 numpy, save/open."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest

import mnemo
import reference as ref
from conftest import BACKENDS
from mnemo import DType, Metric, Status

HIGHER_BETTER = {"cosine": True, "dot": True, "l2sq": False}


def make_store(rt, rng, n: int, dim: int, storage: str = "f32", metric: str = "cosine"
               ) -> Tuple[mnemo.Store, np.ndarray, np.ndarray]:
    """A store of n random vectors under scattered ids; returns (store, ids, f32 vectors)."""
    store = mnemo.Store(rt, dim, storage, metric)
    ids = mnemo.aligned_array(rng.permutation(10 * n)[:n] * 3 + 11, np.uint64)
    vectors = ref.randn(rng, (n, dim))
    store.add(ids, vectors)
    return store, ids, vectors


def stored(vectors: np.ndarray, storage: str) -> np.ndarray:
    """What a store of `storage` holds for f32 input (round to nearest even)."""
    return ref.to_storage(vectors, ref.STORAGE[storage])


def reference_scores(ids: np.ndarray, held: np.ndarray, q: np.ndarray,
                     metric: str, allowed=None, bias: Dict[int, float] = None
                     ) -> Tuple[Dict[int, float], Dict[int, float]]:
    s = ref.similarity(q[None, :], held, metric)[0]
    tol = ref.tolerance(q[None, :], held, s[None, :], metric)[0]
    scores, tols = {}, {}
    for i, sc, tl in zip(ids.tolist(), s, tol):
        if allowed is not None and i not in allowed:
            continue
        b = (bias or {}).get(i, 0.0)
        scores[i] = sc + b if HIGHER_BETTER[metric] else sc - b
        tols[i] = tl + 1e-6 * abs(b)
    return scores, tols


@pytest.mark.parametrize("metric", list(HIGHER_BETTER))
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("n,dim,k", [(5, 3, 5), (31, 17, 4), (300, 128, 10), (257, 769, 300)])
def test_search_matches_float64(rt, rng, n, dim, k, storage, metric) -> None:
    store, ids, vectors = make_store(rt, rng, n, dim, storage, metric)
    held = stored(vectors, storage)
    q = ref.randn(rng, (4, dim))
    got_ids, got_scores = store.search(q, k)
    assert got_ids.shape == (4, k) and got_ids.dtype == np.uint64
    assert got_scores.dtype == np.float32 and mnemo.is_aligned(got_ids)
    for row in range(4):
        want, tol = reference_scores(ids, held, q[row], metric)
        ref.assert_topk(got_ids[row], got_scores[row], want, tol, k, HIGHER_BETTER[metric])


def test_own_query_finds_itself(rt, rng) -> None:
    store, ids, vectors = make_store(rt, rng, 200, 64)
    got_ids, got_scores = store.search(vectors[:50], 1)
    assert np.array_equal(got_ids[:, 0], ids[:50])
    assert np.all(np.abs(got_scores[:, 0] - 1) <= 1e-5)


def test_get_returns_rounded_values(rt, rng) -> None:
    for storage in ref.STORAGE:
        store, ids, vectors = make_store(rt, rng, 10, 33, storage)
        held = ref.as_f64(stored(vectors, storage)).astype(np.float32)
        for row, i in enumerate(ids.tolist()):
            got = store.get(i)
            assert got.dtype == np.float32 and mnemo.is_aligned(got)
            assert np.array_equal(got, held[row]), storage


def test_add_in_storage_dtype(rt, rng) -> None:
    for storage, dtype in (("f16", np.float16), ("bf16", np.uint16)):
        store = mnemo.Store(rt, 5, storage)
        v = ref.randn(rng, (3, 5), dtype)
        store.add([1, 2, 3], v)
        assert np.array_equal(store.get(2), ref.as_f64(v[1]).astype(np.float32))


def test_shape_count_and_len(rt) -> None:
    store = mnemo.Store(rt, 12, np.float16, Metric.L2SQ)
    assert store.shape() == (12, DType.F16, Metric.L2SQ)
    assert (store.dim, store.dtype, store.metric) == (12, DType.F16, Metric.L2SQ)
    assert store.count() == 0 == len(store) == store.slot_count()
    assert mnemo.Store(rt, 4, "bf16", "dot").shape() == (4, DType.BF16, Metric.DOT)


def test_upsert_keeps_slot_and_bias(rt, rng) -> None:
    store, ids, vectors = make_store(rt, rng, 20, 8)
    target = int(ids[7])
    slot = store.slot_of(target)
    store.set_bias([target], [0.5])
    new = ref.randn(rng, (2, 8))
    # A repeated id in one call takes the last vector.
    store.add(mnemo.aligned_array([target, target], np.uint64), new)
    assert store.count() == 20 and store.slot_of(target) == slot
    assert np.array_equal(store.get(target), new[1])
    got_ids, got_scores = store.search(new[1], 1, apply_bias=True)
    assert int(got_ids[0]) == target and abs(got_scores[0] - 1.5) <= 1e-5


def test_new_ids_take_fresh_slots_at_the_end(rt, rng) -> None:
    store, ids, _ = make_store(rt, rng, 10, 4)
    assert sorted(store.slot_of(i) for i in ids.tolist()) == list(range(10))
    store.add([5], ref.randn(rng, (1, 4)))
    assert store.slot_of(5) == 10 and store.slot_count() == 11


def test_remove_and_compaction(rt, rng) -> None:
    store, ids, _ = make_store(rt, rng, 100, 6)
    assert store.remove(mnemo.aligned_array([int(ids[0]), 1, 2], np.uint64)) == 1
    assert store.count() == 99
    with pytest.raises(mnemo.MnemoError) as exc:
        store.get(int(ids[0]))
    assert exc.value.status == Status.E_NOT_FOUND
    with pytest.raises(mnemo.MnemoError) as exc:
        store.slot_of(int(ids[0]))
    assert exc.value.status == Status.E_NOT_FOUND
    # 1 removed slot of 100 is not past a quarter: no compaction.
    assert store.slot_count() == 100
    assert store.remove(mnemo.aligned_array(ids[1:40])) == 39
    assert store.count() == 60
    slots = sorted(store.slot_of(i) for i in ids[40:].tolist())
    # 40 freed slots of 100 is past a quarter: compacted to the live ones.
    assert store.slot_count() == 60 and slots == list(range(60))
    assert store.remove([]) == 0


@pytest.mark.parametrize("metric", list(HIGHER_BETTER))
def test_k_larger_than_count_pads(rt, rng, metric) -> None:
    store, ids, vectors = make_store(rt, rng, 3, 10, metric=metric)
    got_ids, got_scores = store.search(ref.randn(rng, (2, 10)), 7)
    assert np.all(got_ids[:, 3:] == mnemo.NO_ID) and np.all(np.isnan(got_scores[:, 3:]))
    assert set(got_ids[0, :3].tolist()) == set(ids.tolist())
    empty = mnemo.Store(rt, 10)
    e_ids, e_scores = empty.search(ref.randn(rng, (10,)), 2)
    assert np.all(e_ids == mnemo.NO_ID) and np.all(np.isnan(e_scores))


def test_ties_broken_by_smaller_id(rt, rng) -> None:
    store = mnemo.Store(rt, 4, "f32", "dot")
    v = ref.randn(rng, (1, 4))
    same = mnemo.aligned_array(np.repeat(v, 5, axis=0))
    store.add(mnemo.aligned_array([50, 7, 30, 9, 12], np.uint64), same)
    got_ids, _ = store.search(v[0], 5)
    assert got_ids.tolist() == [7, 9, 12, 30, 50]


def test_filter_ids(rt, rng) -> None:
    store, ids, vectors = make_store(rt, rng, 150, 24, metric="dot")
    allowed = set(ids[::3].tolist())
    allow = mnemo.aligned_array(sorted(allowed) + [1, 2, 4], np.uint64)  # unknown ids ignored
    q = ref.randn(rng, (24,))
    got_ids, got_scores = store.search(q, 8, filter_ids=allow)
    want, tol = reference_scores(ids, vectors, q, "dot", allowed)
    ref.assert_topk(got_ids, got_scores, want, tol, 8, True)


@pytest.mark.parametrize("packed", [False, True])
def test_filter_bitmap(rt, rng, packed) -> None:
    store, ids, vectors = make_store(rt, rng, 130, 16, metric="l2sq")
    store.remove(ids[:5])  # freed slots stay in the bitmap's range
    live = ids[5:]
    n_slots = store.slot_count()
    mask = np.zeros(n_slots, dtype=bool)
    chosen = set(live[rng.random(len(live)) < 0.4].tolist())
    for i in chosen:
        mask[store.slot_of(i)] = True
    bitmap = mnemo.bitmap_from_mask(mask) if packed else mask
    q = ref.randn(rng, (16,))
    got_ids, got_scores = store.search(q, 20, filter_bitmap=bitmap)
    want, tol = reference_scores(live, vectors[5:], q, "l2sq", chosen)
    ref.assert_topk(got_ids, got_scores, want, tol, 20, False)


def test_bitmap_of_wrong_length_is_shape_error(rt, rng) -> None:
    store, _, _ = make_store(rt, rng, 70, 4)
    words = mnemo.aligned_zeros(1, np.uint64)
    with pytest.raises(mnemo.MnemoError) as exc:
        store.search(ref.randn(rng, (4,)), 1, filter_bitmap=words, filter_count=64)
    assert exc.value.status == Status.E_SHAPE and exc.value.message


@pytest.mark.parametrize("metric", list(HIGHER_BETTER))
def test_bias(rt, rng, metric) -> None:
    store, ids, vectors = make_store(rt, rng, 60, 12, metric=metric)
    biases = mnemo.aligned_array(rng.uniform(-2, 2, 60), np.float32)
    store.set_bias(ids, biases)
    q = ref.randn(rng, (12,))
    bias = dict(zip(ids.tolist(), biases.astype(np.float64)))
    got_ids, got_scores = store.search(q, 10, apply_bias=True)
    want, tol = reference_scores(ids, vectors, q, metric, bias=bias)
    ref.assert_topk(got_ids, got_scores, want, tol, 10, HIGHER_BETTER[metric])
    # Without apply_bias the plain scores rank.
    got_ids, got_scores = store.search(q, 10)
    want, tol = reference_scores(ids, vectors, q, metric)
    ref.assert_topk(got_ids, got_scores, want, tol, 10, HIGHER_BETTER[metric])


def test_set_bias_unknown_id_changes_nothing(rt, rng) -> None:
    store, ids, vectors = make_store(rt, rng, 5, 4, metric="dot")
    with pytest.raises(mnemo.MnemoError) as exc:
        store.set_bias(mnemo.aligned_array([int(ids[0]), 999999], np.uint64),
                       mnemo.aligned_array([100.0, 1.0], np.float32))
    assert exc.value.status == Status.E_NOT_FOUND
    with_bias = store.search(vectors[:2], 5, apply_bias=True)
    without = store.search(vectors[:2], 5)
    assert np.array_equal(with_bias[0], without[0])
    assert np.array_equal(with_bias[1], without[1])


def test_save_open_round_trip(rt, rng, tmp_path: Path) -> None:
    for storage in ref.STORAGE:
        store, ids, vectors = make_store(rt, rng, 90, 21, storage, "dot")
        store.remove(ids[:3])
        store.set_bias(mnemo.aligned_array(ids[3:6]), mnemo.aligned_array([1.0, -1.0, 0.25], np.float32))
        path = tmp_path / f"store-{storage}.mnemo"
        store.save(path)
        back = mnemo.Store.open(rt, path)
        assert back.shape() == store.shape()
        assert back.count() == store.count() == 87
        for i in ids[3:].tolist():
            assert np.array_equal(back.get(i), store.get(i))
        q = ref.randn(rng, (5, 21))
        for apply_bias in (False, True):
            a_ids, a_scores = store.search(q, 12, apply_bias=apply_bias)
            b_ids, b_scores = back.search(q, 12, apply_bias=apply_bias)
            assert np.array_equal(a_ids, b_ids)
            assert np.array_equal(a_scores, b_scores)


def test_open_refuses_damage(rt, rng, tmp_path: Path) -> None:
    store, _, _ = make_store(rt, rng, 40, 16)
    path = tmp_path / "s.mnemo"
    store.save(str(path))
    data = path.read_bytes()
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.Store.open(rt, tmp_path / "missing.mnemo")
    assert exc.value.status == Status.E_IO
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    cases = {"flipped": bytes(flipped), "truncated": data[: len(data) // 2],
             "magic": b"XXXX" + data[4:], "empty": b""}
    for name, content in cases.items():
        bad = tmp_path / f"{name}.mnemo"
        bad.write_bytes(content)
        with pytest.raises(mnemo.MnemoError) as exc:
            mnemo.Store.open(rt, bad)
        assert exc.value.status == Status.E_CORRUPT, name
        assert exc.value.message, name


def test_save_to_missing_folder_is_io_error(rt, tmp_path: Path) -> None:
    store = mnemo.Store(rt, 4)
    with pytest.raises(mnemo.MnemoError) as exc:
        store.save(tmp_path / "no" / "such" / "dir" / "s.mnemo")
    assert exc.value.status == Status.E_IO


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_never_returned_without_validation(rng, backend) -> None:
    with mnemo.Runtime(backend=backend, validate=False) as rt:
        store, ids, vectors = make_store(rt, rng, 20, 8)
        bad = ref.randn(rng, (1, 8))
        bad[0, 3] = np.nan
        store.add([1], bad)
        got_ids, got_scores = store.search(ref.randn(rng, (3, 8)), 21)
        assert not np.any(got_ids == 1)
        assert np.all(got_ids[:, 20] == mnemo.NO_ID)
        assert not np.any(np.isnan(got_scores[:, :20]))


def test_searches_run_alongside_writes(rt, rng) -> None:
    store, ids, vectors = make_store(rt, rng, 500, 32)
    queries = ref.randn(rng, (8, 32))
    extra = ref.randn(rng, (100, 32))
    failures = []

    def search() -> None:
        try:
            for _ in range(50):
                got_ids, got_scores = store.search(queries, 5)
                assert np.all(got_ids != mnemo.NO_ID) and not np.any(np.isnan(got_scores))
        except Exception as exc:  # reported from the main thread
            failures.append(exc)

    def write() -> None:
        try:
            for i in range(100):
                store.add([10**9 + i], extra[i])  # beyond the ids of make_store
                store.remove([int(ids[i])])
        except Exception as exc:
            failures.append(exc)

    threads = [threading.Thread(target=search) for _ in range(3)] + [threading.Thread(target=write)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert store.count() == 500
    assert np.array_equal(store.get(10**9 + 99), extra[99])
