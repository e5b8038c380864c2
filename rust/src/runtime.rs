//! The runtime: a backend (CPU or CUDA) and its settings.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::{check, Error, Result, Status};
use crate::sys;

/// Where work runs (`enum mnemo_backend`).
///
/// ```
/// assert_eq!(mnemo::Backend::default(), mnemo::Backend::Auto);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// The GPU for large work when one is usable, else the CPU.
    #[default]
    Auto,
    /// The CPU only.
    Cpu,
    /// The GPU; creating the runtime fails when none is usable (never a
    /// silent fallback).
    Cuda,
}

impl Backend {
    fn code(self) -> i32 {
        (match self {
            Backend::Auto => sys::MNEMO_BACKEND_AUTO,
            Backend::Cpu => sys::MNEMO_BACKEND_CPU,
            Backend::Cuda => sys::MNEMO_BACKEND_CUDA,
        }) as i32
    }

    fn from_code(code: i32) -> Option<Backend> {
        [Backend::Auto, Backend::Cpu, Backend::Cuda]
            .into_iter()
            .find(|b| b.code() == code)
    }
}

/// Arithmetic allowed (`enum mnemo_precision`).
///
/// ```
/// assert_eq!(mnemo::Precision::default(), mnemo::Precision::Exact);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// No reduced-precision arithmetic.
    #[default]
    Exact,
    /// Tensor cores may find candidates; returned scores are re-scored
    /// exactly.
    Fast,
}

impl Precision {
    fn code(self) -> i32 {
        (match self {
            Precision::Exact => sys::MNEMO_PRECISION_EXACT,
            Precision::Fast => sys::MNEMO_PRECISION_FAST,
        }) as i32
    }

    fn from_code(code: i32) -> Option<Precision> {
        [Precision::Exact, Precision::Fast]
            .into_iter()
            .find(|p| p.code() == code)
    }
}

/// The owned C handle. Every [`Runtime`] clone and every store holds an
/// `Arc` of it, so it is destroyed only after the last of them.
pub(crate) struct RawRuntime {
    ptr: NonNull<sys::mnemo_runtime>,
}

impl RawRuntime {
    pub(crate) fn as_ptr(&self) -> *mut sys::mnemo_runtime {
        self.ptr.as_ptr()
    }
}

impl Drop for RawRuntime {
    fn drop(&mut self) {
        // SAFETY: the handle came from mnemo_runtime_create and is destroyed
        // once; no store is left (each holds an Arc to this) and no call is
        // running (they all borrow a Runtime or Store that is now gone).
        unsafe { sys::mnemo_runtime_destroy(self.ptr.as_ptr()) };
    }
}

// SAFETY: mnemo.h: "A runtime may be used from many threads at once" and it
// may be created and destroyed on any thread; destruction only happens when
// the last Arc is dropped, so it never runs alongside other calls.
unsafe impl Send for RawRuntime {}
// SAFETY: as above; every call through a shared reference is one the header
// allows concurrently.
unsafe impl Sync for RawRuntime {}

/// A mnemo runtime: the backend that runs the operations and owns the stores.
///
/// Cloning is cheap and shares the same runtime. It may be used from many
/// threads at once. Stores keep it alive.
///
/// ```
/// use mnemo::{Backend, Runtime};
/// let rt = Runtime::builder().backend(Backend::Cpu).threads(1).build()?;
/// let info = rt.info()?;
/// assert_eq!(info.backend_active, Backend::Cpu);
/// # Ok::<(), mnemo::Error>(())
/// ```
#[derive(Clone)]
pub struct Runtime {
    pub(crate) raw: Arc<RawRuntime>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("handle", &self.raw.ptr)
            .finish()
    }
}

impl Runtime {
    /// A runtime with the default options (backend AUTO, EXACT precision,
    /// one thread per core, validation on).
    ///
    /// ```
    /// let rt = mnemo::Runtime::new()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn new() -> Result<Runtime> {
        RuntimeBuilder::default().build()
    }

    /// Starts configuring a runtime.
    ///
    /// ```
    /// use mnemo::{Precision, Runtime};
    /// let rt = Runtime::builder().cpu().precision(Precision::Fast).build()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// What this runtime is and why: the active backend, device, threads.
    ///
    /// ```
    /// let rt = mnemo::Runtime::builder().cpu().build()?;
    /// let info = rt.info()?;
    /// assert_eq!(info.device_id, None);
    /// println!("{} threads on {}: {}", info.num_threads, info.device_name, info.reason);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn info(&self) -> Result<RuntimeInfo> {
        // SAFETY: mnemo_runtime_report is plain data; all-zero is valid.
        let mut report: sys::mnemo_runtime_report = unsafe { std::mem::zeroed() };
        report.struct_size = std::mem::size_of::<sys::mnemo_runtime_report>() as u32;
        // SAFETY: the handle is live and report is a valid, writable struct
        // whose struct_size says how much may be written.
        check(unsafe { sys::mnemo_runtime_info(self.raw.as_ptr(), &mut report) })?;
        Ok(RuntimeInfo {
            backend_requested: Backend::from_code(report.backend_requested)
                .unwrap_or(Backend::Auto),
            backend_active: Backend::from_code(report.backend_active).unwrap_or(Backend::Cpu),
            precision: Precision::from_code(report.precision).unwrap_or(Precision::Exact),
            device_id: (report.device_id >= 0).then_some(report.device_id),
            num_threads: report.num_threads,
            cuda_available: report.cuda_available != 0,
            auto_gpu_min_bytes: report.auto_gpu_min_bytes,
            device_name: c_text(&report.device_name),
            reason: c_text(&report.reason),
        })
    }

    pub(crate) fn ptr(&self) -> *mut sys::mnemo_runtime {
        self.raw.as_ptr()
    }
}

/// Text of a fixed-size C char array, up to its first NUL (or its end).
fn c_text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What [`Runtime::info`] reports.
///
/// ```
/// let info = mnemo::Runtime::builder().cpu().build()?.info()?;
/// assert!(info.num_threads >= 1);
/// # Ok::<(), mnemo::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeInfo {
    /// The backend as asked.
    pub backend_requested: Backend,
    /// Where large work goes: [`Backend::Cpu`] or [`Backend::Cuda`].
    pub backend_active: Backend,
    /// The precision mode.
    pub precision: Precision,
    /// The CUDA device in use, if any.
    pub device_id: Option<i32>,
    /// CPU threads in use.
    pub num_threads: u32,
    /// Whether a CUDA backend can run on the device.
    pub cuda_available: bool,
    /// With AUTO: work touching fewer bytes runs on the CPU.
    pub auto_gpu_min_bytes: u64,
    /// The GPU name, or the CPU SIMD level.
    pub device_name: String,
    /// Why this backend (and why not CUDA).
    pub reason: String,
}

/// Options of a [`Runtime`]; get one from [`Runtime::builder`].
///
/// ```
/// use mnemo::{Backend, Precision, Runtime};
/// let rt = Runtime::builder()
///     .backend(Backend::Cpu)
///     .precision(Precision::Exact)
///     .threads(2)
///     .validate(true)
///     .build()?;
/// # Ok::<(), mnemo::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct RuntimeBuilder {
    backend: Backend,
    precision: Precision,
    device: i32,
    threads: u32,
    validate: Option<bool>,
    workspace_bytes: u64,
}

impl RuntimeBuilder {
    /// Which backend to use (default [`Backend::Auto`]).
    ///
    /// ```
    /// let b = mnemo::Runtime::builder().backend(mnemo::Backend::Cpu);
    /// ```
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Shorthand for `.backend(Backend::Cpu)`.
    ///
    /// ```
    /// let rt = mnemo::Runtime::builder().cpu().build()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn cpu(self) -> Self {
        self.backend(Backend::Cpu)
    }

    /// Shorthand for `.backend(Backend::Cuda)`; building fails without a
    /// usable GPU.
    ///
    /// ```
    /// match mnemo::Runtime::builder().cuda().build() {
    ///     Ok(rt) => println!("GPU: {}", rt.info()?.device_name),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn cuda(self) -> Self {
        self.backend(Backend::Cuda)
    }

    /// Precision mode (default [`Precision::Exact`]).
    ///
    /// ```
    /// let b = mnemo::Runtime::builder().precision(mnemo::Precision::Fast);
    /// ```
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// CUDA device ordinal (default 0).
    ///
    /// ```
    /// let b = mnemo::Runtime::builder().device(0);
    /// ```
    pub fn device(mut self, device: i32) -> Self {
        self.device = device;
        self
    }

    /// CPU threads; 0 (the default) means one per available core.
    ///
    /// ```
    /// let rt = mnemo::Runtime::builder().cpu().threads(1).build()?;
    /// assert_eq!(rt.info()?.num_threads, 1);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn threads(mut self, threads: u32) -> Self {
        self.threads = threads;
        self
    }

    /// Whether NaN/Inf inputs are refused (default true).
    ///
    /// ```
    /// let b = mnemo::Runtime::builder().validate(false);
    /// ```
    pub fn validate(mut self, validate: bool) -> Self {
        self.validate = Some(validate);
        self
    }

    /// Bound on GPU scratch memory; 0 (the default) means 1 GiB.
    ///
    /// ```
    /// let b = mnemo::Runtime::builder().workspace_bytes(256 << 20);
    /// ```
    pub fn workspace_bytes(mut self, bytes: u64) -> Self {
        self.workspace_bytes = bytes;
        self
    }

    /// Creates the runtime.
    ///
    /// Fails with [`Status::BackendUnavailable`] for CUDA without a usable
    /// GPU (the message says why), and with [`Status::Unsupported`] if the
    /// loaded library has another ABI version than this crate was built for.
    ///
    /// ```
    /// let rt = mnemo::Runtime::builder().cpu().build()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn build(self) -> Result<Runtime> {
        check_abi()?;
        // SAFETY: plain function returning a struct by value.
        let mut opts = unsafe { sys::mnemo_runtime_options_default() };
        opts.backend = self.backend.code();
        opts.precision = self.precision.code();
        opts.device_id = self.device;
        opts.num_threads = self.threads;
        if let Some(validate) = self.validate {
            opts.validate = validate as u32;
        }
        opts.workspace_bytes = self.workspace_bytes;
        let mut out: *mut sys::mnemo_runtime = std::ptr::null_mut();
        // SAFETY: opts is a valid, initialised options struct and out a valid
        // place for the handle.
        check(unsafe { sys::mnemo_runtime_create(&opts, &mut out) })?;
        let ptr = NonNull::new(out).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "mnemo_runtime_create returned OK without a runtime",
            )
        })?;
        Ok(Runtime {
            raw: Arc::new(RawRuntime { ptr }),
        })
    }
}

fn check_abi() -> Result<()> {
    let loaded = abi_version();
    if loaded != sys::MNEMO_ABI_VERSION {
        return Err(Error::new(
            Status::Unsupported,
            format!(
                "libmnemo has ABI version {loaded}, this crate was built for {}",
                sys::MNEMO_ABI_VERSION
            ),
        ));
    }
    Ok(())
}

fn static_text(ptr: *const c_char) -> &'static str {
    if ptr.is_null() {
        return "";
    }
    // SAFETY: the library documents these strings as static NUL-terminated
    // text that lives as long as the process.
    unsafe { CStr::from_ptr(ptr) }.to_str().unwrap_or("")
}

/// `"MAJOR.MINOR.PATCH"` of the loaded library.
///
/// ```
/// assert_eq!(mnemo::version(), env!("CARGO_PKG_VERSION"));
/// ```
pub fn version() -> &'static str {
    // SAFETY: no arguments; returns static text.
    static_text(unsafe { sys::mnemo_version() })
}

/// ABI version of the loaded library (the SOVERSION).
///
/// ```
/// assert_eq!(mnemo::abi_version(), 1);
/// ```
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no pointers.
    unsafe { sys::mnemo_abi_version() }
}

/// One line describing the library build: version, compiler, backends,
/// SIMD level, CUDA architectures.
///
/// ```
/// assert!(mnemo::build_info().contains(mnemo::version()));
/// ```
pub fn build_info() -> &'static str {
    // SAFETY: no arguments; returns static text.
    static_text(unsafe { sys::mnemo_build_info() })
}

/// The C name of a raw status value, as the library spells it.
///
/// ```
/// assert_eq!(mnemo::status_name(0), "MNEMO_OK");
/// assert_eq!(mnemo::status_name(-5), "MNEMO_E_UNKNOWN");
/// ```
pub fn status_name(status: i32) -> &'static str {
    // SAFETY: accepts any value; returns static text.
    static_text(unsafe { sys::mnemo_status_name(status) })
}
