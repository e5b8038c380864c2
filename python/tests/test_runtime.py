"""Runtime creation, options and info()."""

from __future__ import annotations

import pytest

import mnemo
from mnemo import Backend, Precision, Status


def test_info_of_backends_under_test(rt: mnemo.Runtime) -> None:
    info = rt.info()
    assert info.backend_requested in (Backend.CPU, Backend.CUDA)
    assert info.backend_active == info.backend_requested
    assert info.precision == Precision.EXACT
    assert info.num_threads >= 1
    assert info.reason
    if info.backend_active == Backend.CUDA:
        assert info.cuda_available and info.device_id >= 0 and info.device_name
    else:
        assert info.device_id == -1


def test_options_are_passed() -> None:
    with mnemo.Runtime(backend="cpu", precision="fast", threads=1, validate=False) as rt:
        info = rt.info()
        assert info.backend_active == Backend.CPU
        assert info.precision == Precision.FAST
        assert info.num_threads == 1


def test_auto_reports_a_choice() -> None:
    with mnemo.Runtime() as rt:
        info = rt.info()
        assert info.backend_requested == Backend.AUTO
        assert info.backend_active in (Backend.CPU, Backend.CUDA)
        if not info.cuda_available:
            assert info.backend_active == Backend.CPU


def test_cuda_without_gpu_is_an_error_not_a_fallback() -> None:
    with mnemo.Runtime(backend="cpu") as probe:
        if probe.info().cuda_available:
            pytest.skip("a usable GPU is present")
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.Runtime(backend="cuda")
    assert exc.value.status == Status.E_BACKEND_UNAVAILABLE
    assert exc.value.status_name == "MNEMO_E_BACKEND_UNAVAILABLE"
    assert exc.value.message


@pytest.mark.parametrize("kwargs", [dict(backend=7), dict(precision=5), dict(validate=2)])
def test_bad_options_are_invalid_argument(kwargs: dict) -> None:
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.Runtime(**kwargs)
    assert exc.value.status == Status.E_INVALID_ARGUMENT
    assert exc.value.message


def test_unknown_names_and_overflowing_ints_are_refused_early() -> None:
    with pytest.raises(ValueError):
        mnemo.Runtime(backend="tpu")
    with pytest.raises(ValueError):
        mnemo.Runtime(threads=2**32)
    with pytest.raises(ValueError):
        mnemo.Runtime(threads=-1)


def test_close_closes_stores_first() -> None:
    rt = mnemo.Runtime(backend="cpu")
    store = mnemo.Store(rt, 8)
    rt.close()
    assert store.closed and rt.closed
    with pytest.raises(mnemo.MnemoError) as exc:
        store.count()
    assert exc.value.status == Status.E_NULL_POINTER
    rt.close()  # idempotent


def test_store_keeps_runtime_alive() -> None:
    store = mnemo.Store(mnemo.Runtime(backend="cpu"), 4)
    assert store.count() == 0 and not store.runtime.closed
