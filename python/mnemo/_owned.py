"""Lifetime plumbing shared by the objects that own a library handle."""
from __future__ import annotations

import os
from typing import Any, TypeVar

_T = TypeVar("_T", bound="OwnedHandle")


class OwnedHandle:
    """A context manager that closes its handle on exit and, as a last
    resort, when garbage-collected in the process that created it (a forked
    child must not free the parent's memory). Subclasses set ``_pid`` when
    they open the handle and implement ``close()``."""

    _pid: int

    def close(self) -> None:  # pragma: no cover - always overridden
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_pid", None) == os.getpid():
                self.close()
        except Exception:
            pass  # interpreter shutdown may have torn down the module already
