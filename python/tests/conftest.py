"""Shared fixtures: the library under test comes from MNEMO_LIBRARY, and each
backend-dependent test runs on the CPU and, with MNEMO_TEST_CUDA=1, on CUDA."""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pytest

CUDA_ON = os.environ.get("MNEMO_TEST_CUDA") == "1"

BACKENDS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
        not CUDA_ON, reason="CUDA backend cases run only with MNEMO_TEST_CUDA=1")),
]


def pytest_configure(config: pytest.Config) -> None:
    # Testing whatever libmnemo the loader happens to find would hide a
    # broken build, so the library must be named.
    if not os.environ.get("MNEMO_LIBRARY"):
        raise pytest.UsageError("set MNEMO_LIBRARY to the path of the libmnemo.so under test")


@pytest.fixture(scope="session", params=BACKENDS)
def rt(request: pytest.FixtureRequest) -> Iterator["object"]:
    """A runtime on each backend under test."""
    import mnemo
    with mnemo.Runtime(backend=request.param) as runtime:
        yield runtime


@pytest.fixture(scope="session")
def cpu_rt() -> Iterator["object"]:
    """A CPU runtime, for tests about the bindings rather than a backend."""
    import mnemo
    with mnemo.Runtime(backend="cpu") as runtime:
        yield runtime


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Fresh random inputs each run; the seed is printed so that a failure
    can be replayed with MNEMO_TEST_SEED."""
    seed = int(os.environ.get("MNEMO_TEST_SEED", np.random.SeedSequence().entropy % 2**63))
    print(f"MNEMO_TEST_SEED={seed}")
    return np.random.default_rng(seed)
