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
from mnemo import _cdefs, _lib

PYTHON_DIR = str(Path(__file__).resolve().parents[1])
HEADER = Path(__file__).resolve().parents[2] / "cabi" / "include" / "mnemo.h"


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
    index = lib.mnemo_index_options_default()
    assert index.struct_size == ctypes.sizeof(_cdefs.IndexOptions)
    assert (index.nlist, index.train_iters, index.train_per_list, index.seed, index.background,
            index.rebuild_hot_min) == (0, 0, 0, 1, 1, 4096)
    assert (index.rebuild_hot_fraction, index.rebuild_skew) == (0.25, 8.0)
    assert lib.mnemo_search_options_default().nprobe == 0
    search = lib.mnemo_search_options_default()
    assert (search.where, search.where_each) == (None, None)
    fields = lib.mnemo_memory_fields_default()
    assert fields.struct_size == ctypes.sizeof(_cdefs.MemoryFields) == 72
    assert (fields.set, fields.namespace_depth, fields.tag_count, fields.attribute_count,
            fields.payload_bytes) == (0, 0, 0, 0, 0)
    assert (ctypes.sizeof(_cdefs.Value), ctypes.sizeof(_cdefs.Attribute)) == (32, 40)
    # A statistics struct smaller than the library's is refused.
    store = mnemo.Store(mnemo.Runtime(backend="cpu"), 4)
    small = _cdefs.StoreStatistics()
    small.struct_size = 8
    assert lib.mnemo_store_stats(store.handle, ctypes.byref(small)) == mnemo.Status.E_INVALID_ARGUMENT
    small_info = _cdefs.IndexInfo()
    small_info.struct_size = 4
    assert (lib.mnemo_store_index_info(store.handle, ctypes.byref(small_info))
            == mnemo.Status.E_INVALID_ARGUMENT)
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


# C scalar types of mnemo.h and the ctypes type each must be mirrored by.
_C_SCALARS = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "uint64_t": ctypes.c_uint64,
              "int64_t": ctypes.c_int64, "float": ctypes.c_float, "double": ctypes.c_double,
              "mnemo_status": ctypes.c_int32, "char": ctypes.c_char}
_C_STRUCTS = {"mnemo_runtime_options": _cdefs.RuntimeOptions,
              "mnemo_runtime_report": _cdefs.RuntimeReport,
              "mnemo_search_options": _cdefs.SearchOptions,
              "mnemo_durable_options": _cdefs.DurableOptions,
              "mnemo_store_statistics": _cdefs.StoreStatistics,
              "mnemo_resample_options": _cdefs.ResampleOptions,
              "mnemo_index_options": _cdefs.IndexOptions,
              "mnemo_index_info": _cdefs.IndexInfo,
              "mnemo_value": _cdefs.Value,
              "mnemo_attribute": _cdefs.Attribute,
              "mnemo_memory_fields": _cdefs.MemoryFields}


def _header_text() -> str:
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} is not here (tests run away from the source tree)")
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _ctype_of(decl: str, text: str) -> type:
    """The ctypes type a C declaration (type and name, comments stripped)
    needs: any pointer as pointer-sized, arrays with their length."""
    # const anywhere (const char* const* parts) changes no layout.
    decl = re.sub(r"\s*\*\s*", "*", " ".join(re.sub(r"\bconst\b", " ", decl).split()))
    m = re.fullmatch(r"(\w+)\s*(\**)\s*(\w*)\s*(?:\[(\w+)\])?", decl)
    assert m, f"cannot read the declaration {decl!r}"
    base, star, _, length = m.groups()
    if star:
        return ctypes.c_void_p
    t = _C_SCALARS.get(base) or _C_STRUCTS.get(base)
    assert t is not None, f"unknown C type {base!r}"
    if length:
        n = int(length) if length.isdigit() else int(
            re.search(rf"#define {length} (\d+)", text).group(1))
        return t * n
    return t


def _same_layout(mirror: type, c: type) -> bool:
    if c is ctypes.c_void_p:  # a pointer: any pointer mirror will do
        return mirror in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(mirror, ctypes._Pointer)
    if hasattr(c, "_length_"):
        return getattr(mirror, "_length_", None) == c._length_ and mirror._type_ is c._type_
    return mirror is c


def test_struct_mirrors_match_the_header() -> None:
    """Every struct of mnemo.h has its ctypes mirror with the same fields in
    the same order and of the same C types (so offsets agree too)."""
    text = _header_text()
    structs = dict((name, body) for name, body in re.findall(
        r"typedef struct (mnemo_\w+) \{(.*?)\} \1;", text, flags=re.S))
    assert set(structs) == set(_C_STRUCTS), "a struct of mnemo.h has no mirror in _cdefs"
    for name, body in structs.items():
        mirror = _C_STRUCTS[name]
        fields = [f.strip() for f in body.split(";") if f.strip()]
        got = [(n, t) for n, t in mirror._fields_]
        assert [n for n, _ in got] == [re.search(r"(\w+)\s*(?:\[\w+\])?$", f).group(1)
                                       for f in fields], name
        for (field, mirrored), decl in zip(got, fields):
            assert _same_layout(mirrored, _ctype_of(decl, text)), f"{name}.{field}: {decl}"


def test_prototypes_match_the_header() -> None:
    """Every function of mnemo.h is declared in _cdefs.PROTOTYPES with the
    same number of parameters, each of the header's type."""
    text = _header_text()
    found = re.findall(r"MNEMO_API\s+([\w\s\*]+?)\s*\b(mnemo_\w+)\s*\(([^)]*)\)\s*;", text)
    assert len(found) > 40
    assert {n for _, n, _ in found} == set(_cdefs.PROTOTYPES)
    for ret, name, params in found:
        restype, argtypes = _cdefs.PROTOTYPES[name]
        params = " ".join(params.split())
        decls = [] if params == "void" else [p.strip() for p in params.split(",")]
        assert len(decls) == len(argtypes), name
        for i, (decl, mirrored) in enumerate(zip(decls, argtypes)):
            assert _same_layout(mirrored, _ctype_of(decl, text)), f"{name} parameter {i}: {decl}"
        if ret.strip() == "void":
            assert restype is None, name
        else:
            assert _same_layout(restype, _ctype_of(ret + " r", text)), f"{name} returns {ret}"
