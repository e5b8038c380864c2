"""Finding and loading the shared library libmnemo."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import List, Tuple

from .errors import LibraryLoadError

# File names of the library, the SOVERSION one first.
if sys.platform == "darwin":
    _FILE_NAMES = ["libmnemo.1.dylib", "libmnemo.dylib"]
elif sys.platform == "win32":
    _FILE_NAMES = ["mnemo.dll", "libmnemo.dll"]
else:
    _FILE_NAMES = ["libmnemo.so.1", "libmnemo.so"]


def _open(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def _candidates() -> List[Tuple[str, str]]:
    """(where it came from, path or soname) in search order, after MNEMO_LIBRARY."""
    found: List[Tuple[str, str]] = []
    lib_dir = os.environ.get("MNEMO_LIB_DIR")
    if lib_dir:
        found += [("MNEMO_LIB_DIR", os.path.join(lib_dir, n)) for n in _FILE_NAMES]
    package_dir = os.path.dirname(os.path.abspath(__file__))
    found += [("package directory", os.path.join(package_dir, n)) for n in _FILE_NAMES]
    system = ctypes.util.find_library("mnemo")
    if system:
        found.append(("ctypes.util.find_library", system))
    # A plain soname lets the dynamic loader search LD_LIBRARY_PATH and its cache.
    found += [("dynamic loader", n) for n in _FILE_NAMES]
    return found


def load() -> Tuple[ctypes.CDLL, str]:
    """Loads libmnemo and returns it with the path or name it was loaded from.

    MNEMO_LIBRARY, when set, names the file to load and nothing else is tried:
    silently loading another copy would hide a broken setup.
    """
    explicit = os.environ.get("MNEMO_LIBRARY")
    if explicit:
        try:
            return _open(explicit), explicit
        except OSError as exc:
            raise LibraryLoadError(
                f"cannot load libmnemo from MNEMO_LIBRARY={explicit!r}: {exc}") from exc

    tried: List[str] = []
    for origin, path in _candidates():
        is_file_path = os.sep in path
        if is_file_path and not os.path.exists(path):
            continue
        try:
            return _open(path), path
        except OSError as exc:
            tried.append(f"  {path} ({origin}): {exc}")
    detail = "\n".join(tried) if tried else "  no candidate file exists"
    raise LibraryLoadError(
        "cannot find libmnemo. Set MNEMO_LIBRARY to the path of libmnemo.so, "
        "or MNEMO_LIB_DIR to its folder, or install it where the dynamic "
        "loader finds it. Tried:\n" + detail)
