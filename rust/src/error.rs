//! Status codes and the error type.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// Why a call failed: the `MNEMO_E_*` codes of `mnemo.h`, whose numbers never
/// change.
///
/// ```
/// use mnemo::Status;
/// assert_eq!(Status::Misaligned.code(), 3);
/// assert_eq!(Status::from_code(3), Status::Misaligned);
/// assert_eq!(Status::Misaligned.name(), "MNEMO_E_MISALIGNED");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// An argument has a value outside its domain.
    InvalidArgument,
    /// A required pointer is NULL.
    NullPointer,
    /// A data pointer is not 16-byte aligned.
    Misaligned,
    /// A product of sizes overflows.
    Overflow,
    /// An index or id is outside its valid range.
    OutOfRange,
    /// An input holds NaN or infinity.
    NonFinite,
    /// Source times of a resampling row decrease.
    NotSorted,
    /// A dtype is unknown or not accepted for this argument.
    Dtype,
    /// Shapes disagree.
    Shape,
    /// Host or device memory could not be allocated.
    OutOfMemory,
    /// The requested backend is not available.
    BackendUnavailable,
    /// A backend failed while executing.
    Backend,
    /// The id is not in the store.
    NotFound,
    /// A file could not be read or written.
    Io,
    /// A store file is damaged, truncated or of an unknown format.
    Corrupt,
    /// The operation is not supported by this build or backend.
    Unsupported,
    /// A bug in mnemo.
    Internal,
    /// A code this crate does not know (from a newer library).
    Unknown(i32),
}

impl Status {
    /// The numeric `mnemo_status` value.
    ///
    /// ```
    /// assert_eq!(mnemo::Status::NotFound.code(), 13);
    /// ```
    pub fn code(self) -> i32 {
        let code = match self {
            Status::InvalidArgument => sys::MNEMO_E_INVALID_ARGUMENT,
            Status::NullPointer => sys::MNEMO_E_NULL_POINTER,
            Status::Misaligned => sys::MNEMO_E_MISALIGNED,
            Status::Overflow => sys::MNEMO_E_OVERFLOW,
            Status::OutOfRange => sys::MNEMO_E_OUT_OF_RANGE,
            Status::NonFinite => sys::MNEMO_E_NON_FINITE,
            Status::NotSorted => sys::MNEMO_E_NOT_SORTED,
            Status::Dtype => sys::MNEMO_E_DTYPE,
            Status::Shape => sys::MNEMO_E_SHAPE,
            Status::OutOfMemory => sys::MNEMO_E_OUT_OF_MEMORY,
            Status::BackendUnavailable => sys::MNEMO_E_BACKEND_UNAVAILABLE,
            Status::Backend => sys::MNEMO_E_BACKEND,
            Status::NotFound => sys::MNEMO_E_NOT_FOUND,
            Status::Io => sys::MNEMO_E_IO,
            Status::Corrupt => sys::MNEMO_E_CORRUPT,
            Status::Unsupported => sys::MNEMO_E_UNSUPPORTED,
            Status::Internal => sys::MNEMO_E_INTERNAL,
            Status::Unknown(code) => return code,
        };
        code as i32
    }

    /// The status for a non-zero `mnemo_status` value.
    ///
    /// ```
    /// use mnemo::Status;
    /// assert_eq!(Status::from_code(6), Status::NonFinite);
    /// assert_eq!(Status::from_code(999), Status::Unknown(999));
    /// ```
    pub fn from_code(code: i32) -> Status {
        const KNOWN: [Status; 17] = [
            Status::InvalidArgument,
            Status::NullPointer,
            Status::Misaligned,
            Status::Overflow,
            Status::OutOfRange,
            Status::NonFinite,
            Status::NotSorted,
            Status::Dtype,
            Status::Shape,
            Status::OutOfMemory,
            Status::BackendUnavailable,
            Status::Backend,
            Status::NotFound,
            Status::Io,
            Status::Corrupt,
            Status::Unsupported,
            Status::Internal,
        ];
        KNOWN
            .into_iter()
            .find(|s| s.code() == code)
            .unwrap_or(Status::Unknown(code))
    }

    /// The C name of the status, as `mnemo_status_name` spells it.
    ///
    /// ```
    /// assert_eq!(mnemo::Status::Corrupt.name(), "MNEMO_E_CORRUPT");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Status::InvalidArgument => "MNEMO_E_INVALID_ARGUMENT",
            Status::NullPointer => "MNEMO_E_NULL_POINTER",
            Status::Misaligned => "MNEMO_E_MISALIGNED",
            Status::Overflow => "MNEMO_E_OVERFLOW",
            Status::OutOfRange => "MNEMO_E_OUT_OF_RANGE",
            Status::NonFinite => "MNEMO_E_NON_FINITE",
            Status::NotSorted => "MNEMO_E_NOT_SORTED",
            Status::Dtype => "MNEMO_E_DTYPE",
            Status::Shape => "MNEMO_E_SHAPE",
            Status::OutOfMemory => "MNEMO_E_OUT_OF_MEMORY",
            Status::BackendUnavailable => "MNEMO_E_BACKEND_UNAVAILABLE",
            Status::Backend => "MNEMO_E_BACKEND",
            Status::NotFound => "MNEMO_E_NOT_FOUND",
            Status::Io => "MNEMO_E_IO",
            Status::Corrupt => "MNEMO_E_CORRUPT",
            Status::Unsupported => "MNEMO_E_UNSUPPORTED",
            Status::Internal => "MNEMO_E_INTERNAL",
            Status::Unknown(_) => "MNEMO_E_UNKNOWN",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Unknown(code) => write!(f, "MNEMO_E_UNKNOWN({code})"),
            other => f.write_str(other.name()),
        }
    }
}

/// A failed mnemo call: the status and the library's message naming the
/// offending argument (or this crate's message for checks made before the
/// call, such as alignment).
///
/// ```
/// use mnemo::{Runtime, Metric, Status};
/// let rt = Runtime::builder().cpu().build()?;
/// let q = mnemo::AlignedVec::from_slice(&[1.0f32, 0.0]);
/// let err = rt.similarity(Metric::Cosine, &q, &q, 3).unwrap_err();
/// assert_eq!(err.status, Status::Shape);
/// assert!(!err.message.is_empty());
/// # Ok::<(), mnemo::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub status: Status,
    /// Human-readable detail.
    pub message: String,
}

/// `Result` with [`Error`].
///
/// ```
/// fn threads() -> mnemo::Result<u32> {
///     Ok(mnemo::Runtime::builder().cpu().build()?.info()?.num_threads)
/// }
/// assert!(threads().unwrap() >= 1);
/// ```
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with the given status and message.
    ///
    /// ```
    /// let e = mnemo::Error::new(mnemo::Status::Io, "disk full");
    /// assert_eq!(e.to_string(), "MNEMO_E_IO: disk full");
    /// ```
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, message)
    }

    pub(crate) fn shape(message: impl Into<String>) -> Error {
        Error::new(Status::Shape, message)
    }

    pub(crate) fn overflow(what: &str) -> Error {
        Error::new(Status::Overflow, format!("{what}: size overflows"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// Turns a returned status into a `Result`, reading `mnemo_last_error()` at
/// once: the text is per thread and only valid until the next mnemo call.
pub(crate) fn check(status: sys::mnemo_status) -> Result<()> {
    if status == sys::MNEMO_OK as i32 {
        return Ok(());
    }
    // SAFETY: mnemo_last_error returns a NUL-terminated per-thread string that
    // stays valid until the next mnemo call on this thread; it is copied here
    // before any other call.
    let message = unsafe {
        let ptr = sys::mnemo_last_error();
        if ptr.is_null() {
            String::new()
        } else {
            CStr::from_ptr(ptr).to_string_lossy().into_owned()
        }
    };
    Err(Error::new(Status::from_code(status), message))
}
