"""mnemo.distributed on a local Ray cluster: four CPU shard actors, one killed
mid-stream, against one local store of the same memories. Skipped where Ray
is not installed (ctest's python_distributed test runs it in a Ray venv)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import mnemo

ray = pytest.importorskip("ray")
from mnemo import distributed  # noqa: E402

DIM = 24


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    yield
    ray.shutdown()


def rows(rng, n):
    return mnemo.aligned_array(rng.uniform(-1, 1, size=(n, DIM)), np.float32)


def local_store(ids, vecs, metric):
    rt = mnemo.Runtime(backend="cpu", threads=1)
    s = mnemo.Store(rt, DIM, metric=metric)
    s.add(mnemo.aligned_array(ids, np.uint64), vecs)
    return rt, s


def same(a, b):
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))


def test_routing_is_stable_and_spreads_ids():
    ids = np.arange(1, 4001, dtype=np.uint64)
    owner = distributed.shard_of(ids, 4)
    assert np.array_equal(owner, distributed.shard_of(ids.copy(), 4))
    counts = np.bincount(owner, minlength=4)
    assert counts.min() > 800, counts


def actor_pid(store, shard, wait_s=30.0):
    """The shard actor's process id, asked again while Ray still reports it restarting."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return ray.get(store.actor(shard).pid.remote())
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_sharded_store_survives_a_killed_actor(cluster, tmp_path):
    rng = np.random.default_rng(1234)
    metric = "l2sq"
    store = distributed.ShardedStore(str(tmp_path), DIM, metric=metric, shards=4, threads=1,
                                     retries=60, retry_wait_s=0.5)
    n, batch = 1200, 100
    ids = rng.choice(10**9, size=n, replace=False).astype(np.uint64)
    vecs = rows(rng, n)
    # Ties across shards: repeated rows under other ids.
    vecs[600:650] = vecs[0:50]
    victim = actor_pid(store, 1)
    killed = threading.Event()

    def kill_soon():
        time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        killed.set()

    for b in range(0, n, batch):
        if b == 5 * batch:
            threading.Thread(target=kill_soon).start()
        store.add(ids[b:b + batch], vecs[b:b + batch])
    assert killed.wait(30)
    # The actor came back as a new process with every acknowledged write. count() goes through
    # the store's retries, so it also waits out a restart still under way when the writes end.
    assert store.count() == n
    assert actor_pid(store, 1) != victim
    removed = store.remove(ids[:100])
    assert removed == 100
    bias_ids = ids[100:160]
    biases = rng.uniform(-0.5, 0.5, size=60).astype(np.float32)
    store.set_bias(bias_ids, biases)

    rt, local = local_store(ids[100:], vecs[100:], metric)
    local.set_bias(mnemo.aligned_array(bias_ids, np.uint64), mnemo.aligned_array(biases, np.float32))
    q = rows(rng, 9)
    for k in (1, 10, 57):
        same(store.search(q, k), local.search(q, k))
        same(store.search(q, k, apply_bias=True), local.search(q, k, apply_bias=True))
    allow = ids[100:400:3]
    same(store.search(q, 10, filter_ids=allow),
         local.search(q, 10, filter_ids=mnemo.aligned_array(allow, np.uint64)))

    # Closed and reopened from the files: the same memories.
    store.close()
    again = distributed.ShardedStore(str(tmp_path), DIM, metric=metric, shards=4, threads=1)
    assert again.count() == n - 100
    same(again.search(q, 10, apply_bias=True), local.search(q, 10, apply_bias=True))
    again.checkpoint()
    same(again.search(q, 10), local.search(q, 10))
    again.close()
    rt.close()


def test_unrecoverable_shard_raises_a_clear_error(cluster, tmp_path):
    store = distributed.ShardedStore(str(tmp_path), DIM, shards=2, threads=1, max_restarts=0,
                                     retries=1, retry_wait_s=0.1)
    os.kill(ray.get(store.actor(0).pid.remote()), signal.SIGKILL)
    with pytest.raises(distributed.ShardUnavailableError) as e:
        store.count()
    assert e.value.shard == 0
    store.close()


def test_activation_over_shards_matches_one_store(cluster, tmp_path):
    """Plain activation over four shard actors equals one store's (the same
    `now` reaches every shard), touch sets the merged result's times only,
    and min-max normalisation, which needs the whole store's ranges, is
    refused."""
    rng = np.random.default_rng(7)
    n = 300
    ids = rng.choice(10**9, size=n, replace=False).astype(np.uint64)
    vecs = rows(rng, n)
    times = 1.7e9 - rng.uniform(0, 1e6, size=n)
    imp = rng.uniform(0, 10, size=n).astype(np.float32)
    store = distributed.ShardedStore(str(tmp_path), DIM, shards=4, threads=1)
    store.add(ids, vecs, times=times, importance=imp)
    rt = mnemo.Runtime(backend="cpu", threads=1)
    one = mnemo.Store(rt, DIM)
    one.add(mnemo.aligned_array(ids, np.uint64), vecs, times=times, importance=imp)
    act = mnemo.Activation(w_recency=0.7, w_importance=0.05, half_life=3600.0 * 24)
    q = rows(rng, 3)
    same(store.search(q, 9, activation=act, now=1.7e9), one.search(q, 9, activation=act, now=1.7e9))

    got_ids, _ = store.search(q, 5, activation=act, now=1.7e9 + 50.0, touch=True)
    touched = set(int(i) for i in got_ids.ravel())
    t, m, _ = store.get_meta(ids)
    for i, tt, mm, t0, m0 in zip(ids, t, m, times, imp):
        assert tt == (1.7e9 + 50.0 if int(i) in touched else t0)
        assert mm == m0
    with pytest.raises(mnemo.MnemoValueError):
        store.search(q, 5, activation=mnemo.Activation(w_recency=1.0, normalize=True))
    store.close()


def test_index_over_shards(cluster, tmp_path):
    """build_index reaches every shard actor (each journals its layout, so a
    reopened store keeps it), search(nprobe=n) every shard's search: at every
    shard's nlist it is the exact search of one store, at 1 the merge of the
    shards' own answers at nprobe 1."""
    rng = np.random.default_rng(11)
    n = 1200
    ids = rng.choice(10**9, size=n, replace=False).astype(np.uint64)
    vecs = rows(rng, n)
    store = distributed.ShardedStore(str(tmp_path), DIM, metric="dot", shards=3, threads=1,
                                     sync_each=False)
    store.add(ids, vecs)
    rt, one = local_store(ids, vecs, "dot")
    q = rows(rng, 7)
    store.build_index(nlist=6, background=False)
    per = store.index_info(per_shard=True)
    assert [i.nlist for i in per] == [6, 6, 6]
    info = store.index_info()
    assert (info.nlist, info.indexed, info.hot, info.rebuilding) == (18, n, 0, False)
    same(store.search(q, 10, nprobe=6), one.search(q, 10))
    some = store.search(q, 10, nprobe=1)
    parts = [ray.get(store.actor(i).search.remote(q, 10, False, None, None, None, 1)) for i in range(3)]
    same(some, mnemo.topk_merge([p[0] for p in parts], [p[1] for p in parts], "dot"))
    with pytest.raises(mnemo.MnemoValueError):
        store.search(q, 10, nprobe=-2)
    store.close()

    again = distributed.ShardedStore(str(tmp_path), DIM, metric="dot", shards=3, threads=1)
    assert again.index_info().nlist == 18
    same(again.search(q, 10, nprobe=1), some)
    again.drop_index()
    assert again.index_info().nlist == 0
    same(again.search(q, 10, nprobe=1), one.search(q, 10))
    again.close()
    rt.close()


def field_rows(ids):
    """Keys (every fourth memory has none), namespaces, tags, attributes and
    payloads for the memories `ids`."""
    n = len(ids)
    return dict(keys=[None if j % 4 == 0 else f"k{int(i)}" for j, i in enumerate(ids)],
                namespaces=[["users", str(j % 5)] for j in range(n)],
                tags=[["news"] if j % 3 == 0 else ["misc", "x"] for j in range(n)],
                attributes=[{"year": 2000 + j % 25, "lang": "en" if j % 2 else "de"} for j in range(n)],
                payloads=[f"text {j}".encode() for j in range(n)])


def held(memories):
    return [None if m is None else (m.id, m.key, m.namespace, m.tags, m.attributes, m.payload) for m in memories]


def test_fields_and_filters_over_shards_match_one_store(cluster, tmp_path):
    """Fields go to each id's shard; filtered searches (one filter, one a
    query, a Filter object), selections, counts, key look-ups, reads and
    namespaces over three shard actors equal one store's; a key stays unique
    over the shards."""
    rng = np.random.default_rng(77)
    n = 600
    ids = rng.choice(10**9, size=n, replace=False).astype(np.uint64)
    vecs = rows(rng, n)
    fields = field_rows(ids)
    store = distributed.ShardedStore(str(tmp_path), DIM, metric="dot", shards=3, threads=1)
    store.add(ids, vecs, **fields)
    rt = mnemo.Runtime(backend="cpu", threads=1)
    one = mnemo.Store(rt, DIM, metric="dot")
    one.add(mnemo.aligned_array(ids, np.uint64), vecs, **fields)
    filters = [{"year": {"$gte": 2020}}, {"$tags": ["news"], "lang": "en"},
               {"$namespace": {"$under": ["users", "3"]}},
               {"$or": [{"year": 2001}, {"$key": f"k{int(ids[5])}"}]},
               {"$key": "nobody"}]
    q = rows(rng, 7)
    for w in filters:
        same(store.search(q, 12, where=w), one.search(q, 12, where=w))
        assert np.array_equal(store.select(w), one.select(w)), w
        assert np.array_equal(store.select(w, offset=3, limit=5), one.select(w, offset=3, limit=5)), w
        assert store.count_where(w) == one.count_where(w), w
    each = [filters[j % len(filters)] for j in range(len(q))]
    same(store.search(q, 5, where_each=each), one.search(q, 5, where_each=each))
    news = mnemo.Filter.tags("news")
    same(store.search(q, 5, where=news), one.search(q, 5, where=news))
    assert store.namespaces() == one.namespaces()
    look = [f"k{int(i)}" for i in ids[:20]] + ["absent"]
    assert np.array_equal(store.ids_of_keys(look), one.ids_of_keys(look))
    absent = np.uint64(10**9 + 1)
    assert held(store.read(np.append(ids[:30], absent))) == held(one.read(np.append(ids[:30], absent)))

    store.update_fields(ids[:10], tags=[["updated"]] * 10)
    one.update_fields(mnemo.aligned_array(ids[:10], np.uint64), tags=[["updated"]] * 10)
    same(store.search(q, 10, where={"$tags": ["updated"]}), one.search(q, 10, where={"$tags": ["updated"]}))

    # A key another shard's memory holds, or one key for two ids: refused
    # before anything is written.
    with pytest.raises(mnemo.MnemoValueError, match="held by memory"):
        store.add([absent], rows(rng, 1), keys=[f"k{int(ids[1])}"])
    with pytest.raises(mnemo.MnemoValueError, match="is given to memories"):
        store.add([absent, absent + np.uint64(1)], rows(rng, 2), keys=["twice", "twice"])
    with pytest.raises(mnemo.MnemoValueError):
        store.add(ids[:2], vecs[:2], tags=[["one list for two ids"]])
    assert store.count() == n
    store.close()
