"""The enumerations of mnemo.h as Python IntEnums, and parsing of user spellings."""

from __future__ import annotations

import enum
from typing import Type, TypeVar, Union


class Status(enum.IntEnum):
    """enum mnemo_status_code; the numbers are pinned by the ABI."""

    OK = 0
    E_INVALID_ARGUMENT = 1
    E_NULL_POINTER = 2
    E_MISALIGNED = 3
    E_OVERFLOW = 4
    E_OUT_OF_RANGE = 5
    E_NON_FINITE = 6
    E_NOT_SORTED = 7
    E_DTYPE = 8
    E_SHAPE = 9
    E_OUT_OF_MEMORY = 10
    E_BACKEND_UNAVAILABLE = 11
    E_BACKEND = 12
    E_NOT_FOUND = 13
    E_IO = 14
    E_CORRUPT = 15
    E_UNSUPPORTED = 16
    E_INTERNAL = 17

    @property
    def c_name(self) -> str:
        """The name mnemo_status_name() gives, e.g. "MNEMO_E_MISALIGNED"."""
        return "MNEMO_" + self.name


class DType(enum.IntEnum):
    """enum mnemo_dtype."""

    F32 = 1
    F16 = 2
    BF16 = 3
    F64 = 4
    U32 = 5
    U64 = 6


class Metric(enum.IntEnum):
    """enum mnemo_metric: cosine and dot are similarities, L2SQ a distance."""

    COSINE = 1
    DOT = 2
    L2SQ = 3


class Backend(enum.IntEnum):
    """enum mnemo_backend."""

    AUTO = 0
    CPU = 1
    CUDA = 2


class Precision(enum.IntEnum):
    """enum mnemo_precision."""

    EXACT = 0
    FAST = 1


class FilterKind(enum.IntEnum):
    """enum mnemo_filter_kind."""

    NONE = 0
    IDS = 1
    SLOT_BITMAP = 2


E = TypeVar("E", bound=enum.IntEnum)

# Extra spellings accepted for string arguments (lower case).
_ALIASES = {
    Metric: {"l2": Metric.L2SQ, "l2sq": Metric.L2SQ, "cos": Metric.COSINE},
    DType: {"float32": DType.F32, "float16": DType.F16, "half": DType.F16,
            "bfloat16": DType.BF16},
}


def parse_enum(value: Union[E, int, str], kind: Type[E], what: str) -> int:
    """Returns the int32 to pass for `value`, given as member, name or int.

    Unknown ints are passed through on purpose: the library is the authority
    on which values it accepts and answers MNEMO_E_INVALID_ARGUMENT.
    """
    if isinstance(value, kind):
        return int(value)
    if isinstance(value, str):
        key = value.strip().lower()
        alias = _ALIASES.get(kind, {}).get(key)
        if alias is not None:
            return int(alias)
        for member in kind:
            if member.name.lower() == key:
                return int(member)
        names = ", ".join(m.name.lower() for m in kind)
        raise ValueError(f"unknown {what} {value!r}; expected one of {names}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a {kind.__name__}, a name or an int, "
                        f"not {type(value).__name__}")
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"{what} {value} does not fit in int32")
    return value
