"""Sublinear recall: Store.build_index / drop_index / wait_index / index_info
and search(nprobe=...), on a Gaussian mixture. nprobe >= nlist gives exactly
the exact scan's results on every path (the numpy fast path, the general
path with conversions, filters, bias, activation); a memory written after
the build is found at nprobe = 1 (the hot tier); the info counts follow the
writes; the index survives save/open; bad arguments raise clear errors
before anything is called or written."""

from __future__ import annotations

import ctypes
import math
import sys
import types
from typing import Any, Tuple

import numpy as np
import pytest

import mnemo
from mnemo import IndexInfo, Status
from mnemo._lib import lib

DIM = 20
CLUSTERS = 24
PER_CLUSTER = 50
N = CLUSTERS * PER_CLUSTER
NLIST = 16
K = 8


def mixture(rng: np.random.Generator, n: int, centres: np.ndarray,
            sigma: float = 0.08) -> np.ndarray:
    """n float32 points, point i around centre i % len(centres)."""
    c = centres[np.arange(n) % len(centres)]
    return mnemo.aligned_array(c + sigma * rng.standard_normal((n, centres.shape[1])), np.float32)


def unit_centres(rng: np.random.Generator, count: int = CLUSTERS) -> np.ndarray:
    c = rng.standard_normal((count, DIM))
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def indexed(rt: Any, rng: np.random.Generator, metric: str = "cosine",
            nlist: int = NLIST) -> Tuple[mnemo.Store, np.ndarray, np.ndarray]:
    """A store of the mixture (ids 1000..) with its index built; returns the
    store, its ids and the centres."""
    centres = unit_centres(rng)
    store = mnemo.Store(rt, DIM, "f32", metric)
    ids = mnemo.aligned_array(np.arange(N) + 1000, np.uint64)
    store.add(ids, mixture(rng, N, centres))
    store.build_index(nlist=nlist, seed=int(rng.integers(1, 2**31)), background=False)
    return store, ids, centres


def same(a: Tuple[np.ndarray, np.ndarray], b: Tuple[np.ndarray, np.ndarray], what: str) -> None:
    assert np.array_equal(a[0], b[0]), what
    assert np.array_equal(np.asarray(a[1]).view(np.uint32), np.asarray(b[1]).view(np.uint32)), what


def recall(exact_ids: np.ndarray, got_ids: np.ndarray) -> float:
    found = sum(len(set(e) & set(g)) for e, g in zip(exact_ids.tolist(), got_ids.tolist()))
    return found / exact_ids.size


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2sq"])
def test_full_probe_is_the_exact_scan(rt, rng, metric) -> None:
    store, ids, centres = indexed(rt, rng, metric)
    info = store.index_info()
    assert isinstance(info, IndexInfo)
    assert (info.nlist, info.indexed, info.hot, info.rebuilding) == (NLIST, N, 0, False)
    assert info.builds >= 1
    assert -(-N // NLIST) <= info.largest_list <= N
    assert math.isfinite(info.last_build_seconds) and info.last_build_seconds >= 0

    q = mixture(rng, 40, centres)
    exact = store.search(q, K)
    assert exact[0].shape == (40, K)
    for nprobe in (NLIST, NLIST + 1, 10**6, 2**32 - 1, np.uint32(NLIST), np.int64(NLIST)):
        # The numpy fast path (aligned float32) ...
        same(store.search(q, K, nprobe=nprobe), exact, f"fast path, nprobe {nprobe}")
        # ... and the general path (a conversion, a 1-D query).
        same(store.search(q.astype(np.float64), K, nprobe=nprobe), exact, f"general, {nprobe}")
        one = store.search(q[3].tolist(), K, nprobe=nprobe)
        same(one, (exact[0][3], exact[1][3]), f"one query, {nprobe}")
    same(store.search(q, K, nprobe=0), exact, "nprobe 0")

    # Filters and bias are those of the exact scan within the lists read.
    allowed = ids[ids % 3 == 0]
    store.set_bias(ids[::5], (rng.uniform(0, 0.05, len(ids[::5]))).astype(np.float32))
    kw = dict(filter_ids=allowed, apply_bias=True)
    exact_f = store.search(q, K, **kw)
    assert np.all(exact_f[0] % 3 == 0)
    same(store.search(q, K, nprobe=NLIST, **kw), exact_f, "filter + bias")
    assert np.all(store.search(q, K, nprobe=2, **kw)[0] % 3 == 0)
    mask = np.zeros(store.slot_count(), bool)
    mask[::2] = True
    same(store.search(q, K, nprobe=NLIST, filter_bitmap=mask),
         store.search(q, K, filter_bitmap=mask), "bitmap filter")
    if metric != "l2sq":
        act = mnemo.Activation(w_recency=0.5, half_life=3600.0)
        same(store.search(q, K, nprobe=NLIST, activation=act, now=1.7e9),
             store.search(q, K, activation=act, now=1.7e9), "activation")


def test_nprobe_reaches_the_library_on_every_host_path(cpu_rt, rng) -> None:
    """On unclustered data one list of sixteen misses much of the exact
    top-k: the fast path and the general path give the same (non-exact)
    answer, so nprobe travelled to the C call on both."""
    store = mnemo.Store(cpu_rt, DIM, "f32", "dot")
    store.add(np.arange(2000), mnemo.aligned_array(rng.standard_normal((2000, DIM)), np.float32))
    store.build_index(nlist=NLIST, background=False)
    q = mnemo.aligned_array(rng.standard_normal((30, DIM)), np.float32)
    exact = store.search(q, K)
    fast = store.search(q, K, nprobe=1)
    general = store.search(q.astype(np.float64), K, nprobe=1)
    same(fast, general, "fast vs general path at nprobe 1")
    assert recall(exact[0], fast[0]) < 0.9
    # More lists find at least as much here, and all of them everything.
    r = [recall(exact[0], store.search(q, K, nprobe=p)[0]) for p in (1, 4, NLIST)]
    assert r[0] <= r[1] <= r[2] == 1.0, r
    # Given outputs are filled the same way.
    out_ids = mnemo.aligned_empty((30, K), np.uint64)
    out_scores = mnemo.aligned_empty((30, K), np.float32)
    got = store.search(q, K, nprobe=1, out_ids=out_ids, out_scores=out_scores)
    assert got[0] is out_ids
    same(got, fast, "given outputs")


def test_recall_on_clustered_data(cpu_rt, rng) -> None:
    store, _, centres = indexed(cpu_rt, rng)
    q = mixture(rng, 60, centres)
    exact = store.search(q, K)[0]
    r = {p: recall(exact, store.search(q, K, nprobe=p)[0]) for p in (1, 2, 4, 8)}
    print("recall@%d by nprobe: %s" % (K, r))
    assert r[4] >= 0.8, r


def test_a_new_memory_is_found_at_nprobe_one(rt, rng) -> None:
    store, ids, centres = indexed(rt, rng)
    # A direction of its own, away from every cluster.
    away = mnemo.aligned_array(-centres[0] + 0.3 * centres[1], np.float32)
    store.add([7], away)
    got_ids, got_scores = store.search(away, 1, nprobe=1)
    assert got_ids[0] == 7 and abs(got_scores[0] - 1.0) < 1e-5
    info = store.index_info()
    assert (info.indexed, info.hot) == (N, 1)

    # An upsert moves the memory out of its list into the hot tier.
    store.add([int(ids[10])], away)
    got_ids, _ = store.search(away, 2, nprobe=1)
    assert sorted(got_ids.tolist()) == [7, int(ids[10])]
    info = store.index_info()
    assert (info.indexed, info.hot) == (N - 1, 2)

    # Removes count out of either.
    assert store.remove([int(ids[0]), 7]) == 2
    info = store.index_info()
    assert (info.indexed, info.hot) == (N - 2, 1)

    q = mixture(rng, 10, centres)
    same(store.search(q, K, nprobe=NLIST), store.search(q, K), "after writes")

    # A rebuild takes the hot tier in.
    store.build_index(nlist=NLIST, background=False)
    store.wait_index()
    info = store.index_info()
    assert (info.nlist, info.indexed, info.hot) == (NLIST, N - 1, 0)
    assert info.builds >= 2

    store.drop_index()
    store.drop_index()  # no index: nothing to do
    assert store.index_info().nlist == 0
    same(store.search(q, K, nprobe=1), store.search(q, K), "no index")


def test_index_survives_save_and_open(cpu_rt, rng, tmp_path) -> None:
    store, _, centres = indexed(cpu_rt, rng)
    q = mixture(rng, 10, centres)
    before = store.search(q, K, nprobe=3)
    store.save(tmp_path / "s.mnemo")
    back = mnemo.Store.open(cpu_rt, tmp_path / "s.mnemo")
    info = back.index_info()
    assert (info.nlist, info.indexed, info.hot) == (NLIST, N, 0)
    same(back.search(q, K, nprobe=3), before, "reopened")

    path = tmp_path / "d.mnemo"
    d = mnemo.Store.open_durable(cpu_rt, path, DIM, sync="os")
    d.add(np.arange(N), mixture(rng, N, centres))
    d.build_index(nlist=NLIST, background=False)
    before = d.search(q, K, nprobe=2)
    d.close()
    d = mnemo.Store.open_durable(cpu_rt, path)
    assert d.index_info().nlist == NLIST
    same(d.search(q, K, nprobe=2), before, "durable reopen")
    d.close()


def test_sharded_runtime(rng) -> None:
    """A store sharded by its runtime: its shards share the centroids
    (nlist is their count) and the counts are summed over the shards;
    nprobe = nlist is the exact search."""
    with mnemo.Runtime(backend="cpu", shards=3) as rt:
        store, _, centres = indexed(rt, rng, nlist=8)
        info = store.index_info()
        assert (info.nlist, info.indexed, info.hot) == (8, N, 0)
        q = mixture(rng, 20, centres)
        same(store.search(q, K, nprobe=8), store.search(q, K), "sharded, nprobe = nlist")


def _poisoned(shape: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
    ids = mnemo.aligned_empty(shape, np.uint64)
    scores = mnemo.aligned_empty(shape, np.float32)
    ids[...] = 12345
    scores[...] = -7.25
    return ids, scores


@pytest.mark.parametrize("bad, error, status", [
    (-1, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    (np.int64(-3), mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    (2**32, mnemo.MnemoValueError, Status.E_OUT_OF_RANGE),
    (1.0, mnemo.MnemoTypeError, Status.E_DTYPE),
    ("4", mnemo.MnemoTypeError, Status.E_DTYPE),
    (None, mnemo.MnemoTypeError, Status.E_DTYPE),
    (True, mnemo.MnemoTypeError, Status.E_DTYPE),
])
def test_bad_nprobe(cpu_rt, rng, bad, error, status) -> None:
    store = mnemo.Store(cpu_rt, DIM, "f32", "dot")
    store.add(np.arange(50), mnemo.aligned_array(rng.standard_normal((50, DIM)), np.float32))
    store.build_index(nlist=4)
    q = mnemo.aligned_array(rng.standard_normal((2, DIM)), np.float32)
    for kw in ({}, {"filter_ids": [1, 2, 3]}, {"apply_bias": True}):
        ids, scores = _poisoned((2, 3))
        with pytest.raises(error) as exc:
            store.search(q, 3, nprobe=bad, out_ids=ids, out_scores=scores, **kw)
        assert exc.value.status == status
        assert "nprobe" in str(exc.value)
        assert np.all(ids == 12345) and np.all(scores == -7.25)


@pytest.mark.parametrize("kw, error, status", [
    ({"nlist": -1}, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    ({"nlist": 2**32}, mnemo.MnemoValueError, Status.E_OUT_OF_RANGE),
    ({"nlist": 4.0}, mnemo.MnemoTypeError, Status.E_DTYPE),
    ({"train_iters": -2}, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    ({"train_per_list": "8"}, mnemo.MnemoTypeError, Status.E_DTYPE),
    ({"seed": -1}, mnemo.MnemoValueError, Status.E_OUT_OF_RANGE),
    ({"rebuild_hot_fraction": 0}, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    ({"rebuild_hot_fraction": math.nan}, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    ({"rebuild_hot_fraction": "0.5"}, mnemo.MnemoTypeError, Status.E_DTYPE),
    ({"rebuild_skew": -1.0}, mnemo.MnemoValueError, Status.E_INVALID_ARGUMENT),
    ({"rebuild_hot_min": -5}, mnemo.MnemoValueError, Status.E_OUT_OF_RANGE),
    ({"background": 1}, mnemo.MnemoTypeError, Status.E_DTYPE),
    # Checked by the library: fewer than 2**23 lists.
    ({"nlist": 2**23}, mnemo.MnemoError, Status.E_INVALID_ARGUMENT),
])
def test_bad_index_options(cpu_rt, rng, kw, error, status) -> None:
    store = mnemo.Store(cpu_rt, DIM, "f32", "cosine")
    store.add(np.arange(50), mnemo.aligned_array(rng.standard_normal((50, DIM)), np.float32))
    with pytest.raises(error) as exc:
        store.build_index(**kw)
    assert exc.value.status == status
    assert store.index_info().nlist == 0, "nothing was built"


def test_index_options_and_info_defaults(cpu_rt) -> None:
    d = lib.mnemo_index_options_default()
    assert d.struct_size == ctypes.sizeof(mnemo._cdefs.IndexOptions)
    import inspect
    params = inspect.signature(mnemo.Store.build_index).parameters
    assert params["nlist"].default == d.nlist
    assert params["train_iters"].default == d.train_iters
    assert params["train_per_list"].default == d.train_per_list
    assert params["seed"].default == d.seed
    assert params["rebuild_hot_fraction"].default == d.rebuild_hot_fraction
    assert params["rebuild_hot_min"].default == d.rebuild_hot_min
    assert params["rebuild_skew"].default == d.rebuild_skew
    assert params["background"].default == bool(d.background)
    store = mnemo.Store(cpu_rt, 4)
    assert store.index_info() == IndexInfo(0, 0, 0, 0, 0, False, 0.0)
    store.add([1, 2, 3], np.eye(3, 4))
    store.build_index(rebuild_hot_fraction=math.inf, rebuild_skew=math.inf)  # inf: never
    store.wait_index()
    store.close()
    with pytest.raises(mnemo.MnemoValueError):
        store.index_info()


class _FakeRay(types.ModuleType):
    """Just enough of Ray for mnemo.distributed in this process: actors are
    plain objects, a remote call runs at once and its "future" is the result."""

    class exceptions:  # noqa: N801 (Ray's name)
        class RayActorError(Exception):
            pass

        class ActorUnavailableError(Exception):
            pass

    def __init__(self) -> None:
        super().__init__("ray")

    @staticmethod
    def remote(**_options: Any) -> Any:
        def wrap(cls: type) -> Any:
            class Handle:
                @staticmethod
                def remote(*args: Any) -> Any:
                    return _FakeActor(cls(*args))
            return Handle
        return wrap

    @staticmethod
    def get(future: Any) -> Any:
        return future

    @staticmethod
    def kill(actor: Any, no_restart: bool = True) -> None:
        pass


class _FakeActor:
    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._obj, name)
        return types.SimpleNamespace(remote=lambda *args: method(*args))


def test_distributed_store_builds_and_probes_every_shard(rng, tmp_path, monkeypatch) -> None:
    """ShardedStore.build_index reaches every shard and search(nprobe=...)
    every shard's search (Ray replaced by in-process actors)."""
    monkeypatch.setitem(sys.modules, "ray", _FakeRay())
    from mnemo import distributed
    store = distributed.ShardedStore(str(tmp_path), DIM, metric="dot", shards=3, sync_each=False)
    points = mnemo.aligned_array(rng.standard_normal((1500, DIM)), np.float32)
    store.add(np.arange(1500), points)
    q = mnemo.aligned_array(rng.standard_normal((12, DIM)), np.float32)
    exact = store.search(q, K)
    assert store.index_info() == IndexInfo(0, 0, 0, 0, 0, False, 0.0)

    store.build_index(nlist=8, background=False)
    info = store.index_info()
    assert (info.nlist, info.indexed, info.hot) == (24, 1500, 0)
    per = store.index_info(per_shard=True)
    assert [i.nlist for i in per] == [8, 8, 8] and sum(i.indexed for i in per) == 1500
    same(store.search(q, K, nprobe=8), exact, "every list of every shard")
    one = store.search(q, K, nprobe=1)
    assert recall(exact[0], one[0]) < 1.0  # one list of eight per shard misses some
    # The same answer as the shards' own searches at nprobe 1, merged.
    parts = [store.actor(i)._obj._store.search(q, K, nprobe=1) for i in range(3)]
    merged = mnemo.topk_merge([p[0] for p in parts], [p[1] for p in parts], "dot")
    same(one, merged, "merged per-shard nprobe 1")

    with pytest.raises(mnemo.MnemoValueError):
        store.search(q, K, nprobe=-1)
    with pytest.raises(mnemo.MnemoTypeError):
        store.build_index(nlist="8")
    store.wait_index()
    store.drop_index()
    assert store.index_info().nlist == 0
    same(store.search(q, K, nprobe=1), exact, "no index: exact")
    store.close()
