"""The compiled extension mnemo._mnemo_ext, compiled against mnemo.h with
nanobind: the calls on hot paths (mnemo_store_search,
mnemo_store_search_device; mnemo_store_read and its records for Store.read
and the framework adapters), and the packing of what Store.add and
update_fields write and of the keys Store.ids_of_keys looks up (called
through ctypes with the extension's arrays); everything else goes through
ctypes (_lib, _cdefs). Each C function is called through one of the two.

It is looked for in this package's folder (an installed wheel), then in the
folder of the libmnemo that _lib loaded (a build tree: build/lib). It must
use that same loaded library (checked here), so handles made through ctypes
are valid in it. Without it the package imports, and Store.search and
Store.read raise LibraryLoadError saying why (writes pack in Python).
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any, List, Optional, Tuple

import numpy as np

from . import _lib
from .arrays import aligned_empty
from .errors import LibraryLoadError, MnemoError, MnemoTypeError, MnemoValueError

NAME = "_mnemo_ext"

# The kinds of error the extension raises (mnemo_ext.cpp, enum ErrorKind).
_ERRORS = (MnemoError, MnemoTypeError, MnemoValueError)


def _make_error(kind: int, status: int, message: str) -> MnemoError:
    """The exception for a failed call (kind 0, with the library's status
    name) or a refused argument (1: type, 2: value)."""
    name = _lib.status_name(status) if kind == 0 else None
    return _ERRORS[kind](status, message, name)


def _folders() -> List[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    found = [here]
    lib_dir = os.path.dirname(_lib.LIBRARY_PATH)
    if lib_dir and os.path.abspath(lib_dir) != here:
        found.append(os.path.abspath(lib_dir))
    return found


def _load() -> Tuple[Optional[ModuleType], str]:
    """(the module, "") or (None, why it is missing)."""
    for folder in _folders():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, NAME + suffix)
            if os.path.exists(path):
                return _import(path), ""
    others = sorted(f for folder in _folders() if os.path.isdir(folder)
                    for f in os.listdir(folder) if f.startswith(NAME + "."))
    built = f" (found {', '.join(others)}: built for another Python)" if others else ""
    return None, (f"the compiled extension mnemo.{NAME} for this Python "
                  f"({importlib.machinery.EXTENSION_SUFFIXES[0]}) is in none of "
                  f"{', '.join(_folders())}{built}. Install the package with pip, or build "
                  "the CMake target _mnemo_ext (it lands next to libmnemo; "
                  "scripts/py-ext-build.sh does both)")


def _import(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"mnemo.{NAME}", path)
    assert spec is not None and spec.loader is not None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except ImportError as exc:
        raise LibraryLoadError(f"cannot load the extension {path}: {exc}") from exc
    if module.ABI_VERSION != _lib.ABI_VERSION:
        raise LibraryLoadError(f"{path} was built for ABI version {module.ABI_VERSION}, this "
                               f"package for ABI version {_lib.ABI_VERSION}")
    ours = ctypes.cast(_lib.lib.mnemo_abi_version, ctypes.c_void_p).value
    if module.library_address() != ours:
        raise LibraryLoadError(f"{path} is linked with another libmnemo than the one loaded "
                               f"from {_lib.LIBRARY_PATH}; put the extension next to that "
                               "library, or load the library next to the extension")
    module.configure(_make_error, np, aligned_empty)
    sys.modules[spec.name] = module
    return module


class _Missing:
    """Stands in for the extension when it is not there: any use raises."""

    def __init__(self, why: str) -> None:
        self._why = why

    def __getattr__(self, name: str) -> Any:
        raise LibraryLoadError(self._why)


_module, MISSING = _load()

#: The extension, or a stand-in whose every attribute raises LibraryLoadError.
ext: Any = _module if _module is not None else _Missing(MISSING)

#: True when the extension was found and loaded.
AVAILABLE = _module is not None
