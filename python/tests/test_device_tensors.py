"""GPU tensors (torch, CuPy) searched and scored on the device without a
copy, results equal to the host path. Runs with MNEMO_TEST_CUDA=1 where
torch or CuPy sees a GPU; skipped elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref
from conftest import CUDA_ON

pytestmark = pytest.mark.skipif(not CUDA_ON, reason="device tensors need MNEMO_TEST_CUDA=1")


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver or no device
        pytest.skip("CuPy sees no GPU")
    return cupy


FRAMEWORKS = {
    "torch": (_torch, lambda m, a: m.from_numpy(np.ascontiguousarray(a)).cuda(),
              lambda t: t.cpu().numpy()),
    "cupy": (_cupy, lambda m, a: m.asarray(a), lambda t: t.get()),
}


@pytest.fixture(scope="module")
def cuda_rt():
    with mnemo.Runtime(backend="cuda") as runtime:
        yield runtime


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
@pytest.mark.parametrize("nq, n, dim, k", [(1, 3001, 96, 10), (7, 1000, 37, 33)])
def test_search_device_tensor_matches_host(cuda_rt, rng, fw, nq, n, dim, k) -> None:
    get, to_dev, to_host = FRAMEWORKS[fw]
    m = get()
    store = mnemo.Store(cuda_rt, dim, "f32", "cosine")
    ids = rng.permutation(10 * n)[:n].astype(np.int64) + 5
    store.add(ids, ref.randn(rng, (n, dim)))
    q = ref.randn(rng, (nq, dim))
    want_ids, want_scores = store.search(q, k)
    qd = to_dev(m, q)
    got_ids, got_scores = store.search(qd, k)
    assert type(got_ids).__module__.split(".")[0] == fw
    assert str(got_ids.device) == str(qd.device)
    np.testing.assert_array_equal(to_host(got_ids).astype(np.uint64), want_ids)
    np.testing.assert_allclose(to_host(got_scores), want_scores, rtol=1e-5, atol=1e-6)
    one_ids, _ = store.search(to_dev(m, q[0]), k)  # a 1-D query is one query
    assert tuple(one_ids.shape) == (k,)
    np.testing.assert_array_equal(to_host(one_ids).astype(np.uint64), want_ids[0])


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
@pytest.mark.parametrize("metric", ["cosine", "dot", "l2sq"])
def test_similarity_device_tensor_matches_host(cuda_rt, rng, fw, metric) -> None:
    get, to_dev, to_host = FRAMEWORKS[fw]
    m = get()
    q, t = ref.randn(rng, (5, 77)), ref.randn(rng, (301, 77))
    want = mnemo.similarity(cuda_rt, q, t, metric)
    got = mnemo.similarity(cuda_rt, to_dev(m, q), to_dev(m, t), metric)
    assert type(got).__module__.split(".")[0] == fw
    np.testing.assert_allclose(to_host(got), want, rtol=1e-5, atol=1e-5)
    ref.assert_scores(to_host(got), q, t, metric)


def test_device_tensor_refusals(cuda_rt, rng) -> None:
    torch = _torch()
    store = mnemo.Store(cuda_rt, 16)
    store.add([1, 2], ref.randn(rng, (2, 16)))
    with pytest.raises(TypeError, match="queries"):
        store.search(torch.zeros(2, 16, dtype=torch.float64, device="cuda"), 1)
    with pytest.raises(ValueError, match="queries"):
        store.search(torch.zeros(16, 2, device="cuda").T, 1)
    with pytest.raises(TypeError, match="targets"):
        mnemo.similarity(cuda_rt, torch.zeros(1, 16, device="cuda"), ref.randn(rng, (3, 16)))
