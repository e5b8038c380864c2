"""mnemo.topk_merge against a plain Python merge: ties, NaN and NO_ID padding,
duplicate ids, both metric directions, and the merge of a store's parts."""

import numpy as np
import pytest

import mnemo

NO_ID = mnemo.NO_ID


def reference(ids, scores, metric, k):
    out = []
    for q in range(ids[0].shape[0]):
        best = {}
        for part_ids, part_sc in zip(ids, scores):
            for i, s in zip(part_ids[q], part_sc[q]):
                if int(i) == NO_ID or np.isnan(s):
                    continue
                key = -float(s) if metric == "l2sq" else float(s)
                if int(i) not in best or key > best[int(i)][0]:
                    best[int(i)] = (key, s)
        order = sorted(best.items(), key=lambda e: (-e[1][0], e[0]))[:k]
        out.append(order)
    return out


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2sq"])
@pytest.mark.parametrize("parts,k", [(1, 1), (3, 5), (5, 17)])
def test_merge_matches_reference(metric, parts, k):
    rng = np.random.default_rng(parts * 100 + k)
    nq = 6
    ids = [rng.integers(0, 3 * k + 4, size=(nq, k)).astype(np.uint64) for _ in range(parts)]
    scores = [(rng.integers(0, 5, size=(nq, k)) * 0.25 - 0.5).astype(np.float32) for _ in range(parts)]
    for i, s in zip(ids, scores):
        i[rng.random((nq, k)) < 0.1] = NO_ID
        s[rng.random((nq, k)) < 0.1] = np.nan
    got_ids, got_sc = mnemo.topk_merge(ids, scores, metric)
    want = reference(ids, scores, metric, k)
    for q in range(nq):
        for j in range(k):
            if j < len(want[q]):
                assert int(got_ids[q, j]) == want[q][j][0]
                assert got_sc[q, j] == want[q][j][1][1]
            else:
                assert int(got_ids[q, j]) == NO_ID and np.isnan(got_sc[q, j])


def test_merge_of_store_parts_equals_the_whole():
    rng = np.random.default_rng(7)
    dim, n = 13, 300
    vecs = mnemo.aligned_array(rng.uniform(-1, 1, size=(n, dim)), np.float32)
    ids = np.arange(10, 10 + n, dtype=np.uint64)
    q = mnemo.aligned_array(rng.uniform(-1, 1, size=(4, dim)), np.float32)
    with mnemo.Runtime(backend="cpu", threads=1) as rt:
        whole = mnemo.Store(rt, dim, metric="dot")
        whole.add(mnemo.aligned_array(ids, np.uint64), vecs)
        parts = []
        for p in range(3):
            s = mnemo.Store(rt, dim, metric="dot")
            s.add(mnemo.aligned_array(ids[p::3], np.uint64), mnemo.aligned_array(vecs[p::3], np.float32))
            parts.append(s.search(q, 11))
        got = mnemo.topk_merge([p[0] for p in parts], [p[1] for p in parts], "dot")
        want = whole.search(q, 11)
        assert np.array_equal(got[0], want[0])
        assert np.array_equal(got[1].view(np.uint32), want[1].view(np.uint32))


def test_merge_errors():
    a = np.zeros((2, 3), np.uint64)
    s = np.zeros((2, 3), np.float32)
    with pytest.raises(mnemo.MnemoError):
        mnemo.topk_merge([a], [s, s], "dot")
    with pytest.raises(mnemo.MnemoError):
        mnemo.topk_merge([a], [np.zeros((2, 4), np.float32)], "dot")
    with pytest.raises(ValueError):
        mnemo.topk_merge([a], [s], "hamming")


def test_sharded_cpu_runtime_matches_unsharded():
    rng = np.random.default_rng(11)
    dim, n = 9, 500
    vecs = mnemo.aligned_array(rng.uniform(-1, 1, size=(n, dim)), np.float32)
    ids = mnemo.aligned_array(rng.choice(10**6, size=n, replace=False), np.uint64)
    q = mnemo.aligned_array(rng.uniform(-1, 1, size=(5, dim)), np.float32)
    with mnemo.Runtime(backend="cpu", threads=1) as one, \
            mnemo.Runtime(backend="cpu", threads=1, shards=3) as many:
        info = many.info()
        assert info.shards == 3 and info.devices == ()
        assert one.info().shards == 1
        a, b = mnemo.Store(one, dim, metric="l2sq"), mnemo.Store(many, dim, metric="l2sq")
        a.add(ids, vecs)
        b.add(ids, vecs)
        for k in (1, 8, n + 2):
            ra, rb = a.search(q, k), b.search(q, k)
            assert np.array_equal(ra[0], rb[0])
            assert np.array_equal(ra[1].view(np.uint32), rb[1].view(np.uint32))
    with pytest.raises(mnemo.MnemoError):
        mnemo.Runtime(backend="cpu", shards=1000)
    with pytest.raises(mnemo.MnemoError):
        mnemo.Runtime(devices="some")
