"""The loaded library, its ABI check, and the status check after each call."""

from __future__ import annotations

import ctypes

from . import _cdefs, _loader
from .enums import Status
from .errors import LibraryLoadError, MnemoError

#: MNEMO_ABI_VERSION of the mnemo.h this package was written against.
ABI_VERSION = 1


def _load() -> "tuple[ctypes.CDLL, str]":
    lib, where = _loader.load()
    try:
        abi = lib.mnemo_abi_version
    except AttributeError:
        raise LibraryLoadError(f"{where} is not libmnemo: no mnemo_abi_version") from None
    abi.restype, abi.argtypes = ctypes.c_uint32, []
    found = abi()
    if found != ABI_VERSION:
        raise LibraryLoadError(
            f"{where} has ABI version {found}, but this mnemo Python package "
            f"was written for ABI version {ABI_VERSION}; install a libmnemo "
            f"with SOVERSION {ABI_VERSION} or the package matching the library")
    try:
        _cdefs.declare(lib)
    except AttributeError as exc:
        raise LibraryLoadError(f"{where} lacks part of ABI {ABI_VERSION}: {exc}") from None
    return lib, where


lib, LIBRARY_PATH = _load()


def status_name(status: int) -> str:
    """mnemo_status_name(status)."""
    return lib.mnemo_status_name(int(status)).decode()


def last_error() -> str:
    """mnemo_last_error() of the calling thread."""
    return lib.mnemo_last_error().decode(errors="replace")


def check(status: int) -> None:
    """Raises MnemoError for a failed status.

    Must run right after the call, on the same thread: the message lives in
    thread-local storage that the next mnemo call may replace.
    """
    if status != Status.OK:
        raise MnemoError(status, last_error(), status_name(status))
