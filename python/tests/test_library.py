"""Loading, versions and status names."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mnemo
from mnemo import _lib

PYTHON_DIR = str(Path(__file__).resolve().parents[1])


def test_loaded_from_env() -> None:
    assert mnemo.library_path() == os.environ["MNEMO_LIBRARY"]


def test_versions() -> None:
    assert mnemo.abi_version() == mnemo.ABI_VERSION == 1
    assert re.fullmatch(r"\d+\.\d+\.\d+", mnemo.version())
    info = mnemo.build_info()
    assert mnemo.version() in info


def test_status_names_match_library() -> None:
    for status in mnemo.Status:
        assert _lib.status_name(status) == status.c_name
    assert _lib.status_name(999) == "MNEMO_E_UNKNOWN"
    assert _lib.status_name(-1) == "MNEMO_E_UNKNOWN"


def _import_with(env_updates: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, **env_updates)
    return subprocess.run([sys.executable, "-c", "import mnemo"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_bad_library_path_is_an_import_error(tmp_path: Path) -> None:
    proc = _import_with({"MNEMO_LIBRARY": str(tmp_path / "nope.so")})
    assert proc.returncode != 0
    assert "LibraryLoadError" in proc.stderr and "MNEMO_LIBRARY" in proc.stderr


def test_lib_dir_is_searched(tmp_path: Path) -> None:
    shutil.copy(os.environ["MNEMO_LIBRARY"], tmp_path / "libmnemo.so.1")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, MNEMO_LIB_DIR=str(tmp_path))
    del env["MNEMO_LIBRARY"]
    proc = subprocess.run([sys.executable, "-c", "import mnemo; print(mnemo.library_path())"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "libmnemo.so.1")


def test_other_abi_version_is_refused(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a library with another ABI version")
    src = tmp_path / "fake.c"
    src.write_text(textwrap.dedent("""
        unsigned int mnemo_abi_version(void) { return 2; }
    """))
    lib = tmp_path / "libmnemo.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    proc = _import_with({"MNEMO_LIBRARY": str(lib)})
    assert proc.returncode != 0
    assert "ABI version 2" in proc.stderr and "ABI version 1" in proc.stderr


def test_struct_mirrors_match_library_sizes() -> None:
    # The *_default() functions set struct_size to the library's sizeof.
    from mnemo import _cdefs
    lib = _lib.lib
    assert lib.mnemo_runtime_options_default().struct_size == ctypes.sizeof(_cdefs.RuntimeOptions)
    assert lib.mnemo_search_options_default().struct_size == ctypes.sizeof(_cdefs.SearchOptions)
    assert (lib.mnemo_resample_options_default().struct_size
            == ctypes.sizeof(_cdefs.ResampleOptions))
    durable = lib.mnemo_durable_options_default()
    assert durable.struct_size == ctypes.sizeof(_cdefs.DurableOptions)
    assert (durable.sync, durable.dim, durable.dtype, durable.metric) == (0, 0, 1, 1)
    # A statistics struct smaller than the library's is refused.
    store = mnemo.Store(mnemo.Runtime(backend="cpu"), 4)
    small = _cdefs.StoreStatistics()
    small.struct_size = 8
    assert lib.mnemo_store_stats(store.handle, ctypes.byref(small)) == mnemo.Status.E_INVALID_ARGUMENT
    store.close()
    defaults = lib.mnemo_runtime_options_default()
    assert (defaults.backend, defaults.precision, defaults.validate) == (0, 0, 1)


def test_alloc_is_aligned() -> None:
    ptr = ctypes.c_void_p()
    for size in (1, 3, 16, 1000):
        assert _lib.lib.mnemo_alloc(size, ctypes.byref(ptr)) == mnemo.Status.OK
        assert ptr.value % mnemo.ALIGNMENT == 0
        _lib.lib.mnemo_free(ptr)
    assert _lib.lib.mnemo_alloc(0, ctypes.byref(ptr)) == mnemo.Status.E_INVALID_ARGUMENT
    _lib.lib.mnemo_free(None)
