"""Exceptions raised by the mnemo package."""

from __future__ import annotations

from typing import Any, Optional

from .enums import Status


def _name_of(status: int) -> str:
    try:
        return Status(status).c_name
    except ValueError:
        return "MNEMO_E_UNKNOWN"


class MnemoError(Exception):
    """A mnemo call failed.

    Attributes:
        status: the mnemo_status code (an int; compare with mnemo.Status).
        status_name: its name, e.g. "MNEMO_E_MISALIGNED".
        message: the text of mnemo_last_error(), read right after the call,
            or the package's own text for a check made before calling.
    """

    def __init__(self, status: int, message: str,
                 status_name: Optional[str] = None) -> None:
        self.status: int = int(status)
        self.status_name: str = status_name or _name_of(status)
        self.message: str = message
        super().__init__(f"{self.status_name} ({self.status}): {message}")

    def __reduce__(self) -> Any:
        # Pickled by its arguments (an error raised in another process, a
        # Ray actor's, reaches the caller as itself).
        return (type(self), (self.status, self.message, self.status_name))


class MnemoTypeError(MnemoError, TypeError):
    """An argument was refused by the package before calling the library
    because of its type or dtype (status MNEMO_E_DTYPE)."""


class MnemoValueError(MnemoError, ValueError):
    """An argument was refused by the package before calling the library:
    misaligned (MNEMO_E_MISALIGNED), wrong shape (MNEMO_E_SHAPE), not
    C-contiguous or read-only (MNEMO_E_INVALID_ARGUMENT), out of range
    (MNEMO_E_OUT_OF_RANGE) or a closed handle (MNEMO_E_NULL_POINTER)."""


class LibraryLoadError(ImportError):
    """libmnemo could not be found or loaded, or has another ABI version."""
