//! Durable stores: a snapshot plus a journal of every write, replayed on
//! open (`mnemo_store_open_durable`, `mnemo_store_checkpoint`), and the
//! statistics of any store (`mnemo_store_stats`).

use std::path::{Path, PathBuf};

use crate::dtype::Storage;
use crate::error::{check, Error, Result, Status};
use crate::ops::Metric;
use crate::runtime::Runtime;
use crate::store::{path_to_c, Store};
use crate::sys;

/// When a journaled write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// `fdatasync` before each write returns: every acknowledged write
    /// survives a crash of the machine (the default).
    #[default]
    EachWrite,
    /// Written at once and flushed by the OS: survives a crash of the
    /// process, not of the machine.
    Os,
}

/// Options of [`Store::open_durable`].
///
/// ```
/// use mnemo::{DurableOptions, Metric, SyncPolicy};
/// let opts = DurableOptions::new().create(384, Metric::Dot).sync(SyncPolicy::Os);
/// assert_eq!(opts.sync, SyncPolicy::Os);
/// ```
#[derive(Debug, Clone, Default)]
pub struct DurableOptions {
    /// When each write is flushed.
    pub sync: SyncPolicy,
    /// The journal file; `None`: the snapshot path followed by `.journal`.
    pub journal_path: Option<PathBuf>,
    /// `Some((dim, metric))`: create the store when no snapshot exists (an
    /// existing one must have this shape, else [`Status::Shape`]). `None`:
    /// the store must exist.
    pub create: Option<(usize, Metric)>,
}

impl DurableOptions {
    /// Open an existing store, flushing each write.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates the store with this shape when it does not exist.
    pub fn create(mut self, dim: usize, metric: Metric) -> Self {
        self.create = Some((dim, metric));
        self
    }

    /// Sets the sync policy.
    pub fn sync(mut self, sync: SyncPolicy) -> Self {
        self.sync = sync;
        self
    }

    /// Puts the journal at `path`.
    pub fn journal_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.journal_path = Some(path.into());
        self
    }
}

/// What a store holds (`mnemo_store_statistics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    /// Opened by [`Store::open_durable`].
    pub durable: bool,
    /// Live vectors.
    pub vectors: u64,
    /// Removed slots not yet compacted away.
    pub tombstones: u64,
    /// Slots (see [`Store::slot_count`]).
    pub slots: u64,
    /// Host memory of vectors, norms, biases and the id index.
    pub host_bytes: u64,
    /// Device memory of the GPU copy; 0 without one.
    pub device_bytes: u64,
    /// Writes journaled since the last snapshot.
    pub journal_records: u64,
    /// Size of the journal file.
    pub journal_bytes: u64,
    /// Number of the last journaled write.
    pub sequence: u64,
    /// Filtered queries since the store was made or opened whose filter
    /// the store's GPU evaluated.
    pub filtered_on_device: u64,
    /// Filtered queries whose filter was evaluated on the host.
    pub filtered_on_host: u64,
    /// Of those on the host, queries whose matches were one run of rows (a
    /// namespace of a store laid out by [`Store::cluster`]), read as such.
    pub filtered_ranged: u64,
}

impl<T: Storage> Store<T> {
    /// Opens, or creates (see [`DurableOptions::create`]), the durable store
    /// whose snapshot is at `path`: every write (add, remove, set_bias,
    /// set_times, set_importance, the times a touching search sets) is
    /// appended to the journal before it returns and replayed by the next
    /// open. Its dtype must be `T` (else [`Status::Dtype`]). A damaged
    /// snapshot or journal is [`Status::Corrupt`]; no store without
    /// `create`, or a journal locked by another process, [`Status::Io`].
    ///
    /// ```
    /// use mnemo::{AlignedVec, DurableOptions, Metric, Runtime, Store, SyncPolicy};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let dir = std::env::temp_dir().join(format!("mnemo-durable-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("memory.store");
    /// let opts = DurableOptions::new().create(2, Metric::Dot).sync(SyncPolicy::Os);
    /// {
    ///     let store = Store::<f32>::open_durable(&rt, &path, &opts)?;
    ///     store.add(&AlignedVec::from_slice(&[5u64]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// }
    /// let back = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new())?;
    /// assert_eq!(back.get(5)?.as_slice(), &[1.0, 2.0]);
    /// # drop(back);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn open_durable(
        rt: &Runtime,
        path: impl AsRef<Path>,
        opts: &DurableOptions,
    ) -> Result<Self> {
        let path = path.as_ref();
        let c_path = path_to_c(path)?;
        let c_journal = opts.journal_path.as_deref().map(path_to_c).transpose()?;
        // SAFETY: plain function returning a struct by value.
        let mut raw = unsafe { sys::mnemo_durable_options_default() };
        raw.sync = match opts.sync {
            SyncPolicy::EachWrite => sys::MNEMO_SYNC_EACH_WRITE as i32,
            SyncPolicy::Os => sys::MNEMO_SYNC_OS as i32,
        };
        raw.journal_path = c_journal.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        if let Some((dim, metric)) = opts.create {
            if dim == 0 {
                return Err(Error::invalid(
                    "open_durable: a created store needs dim >= 1",
                ));
            }
            raw.dim = dim as u64;
            raw.dtype = T::DTYPE.code();
            raw.metric = metric.code();
        }
        let mut out: *mut sys::mnemo_store = std::ptr::null_mut();
        // SAFETY: live runtime; the path strings and options outlive the
        // call; out is a valid place.
        check(unsafe { sys::mnemo_store_open_durable(rt.ptr(), c_path.as_ptr(), &raw, &mut out) })?;
        let store = Self::wrap(rt, out)?;
        let stored = store.stored_dtype()?;
        if stored != Some(T::DTYPE) {
            return Err(Error::new(
                Status::Dtype,
                format!(
                    "{}: the store holds {stored:?} vectors, not {:?}",
                    path.display(),
                    T::DTYPE
                ),
            ));
        }
        Ok(store)
    }

    /// Durable store: writes a new snapshot and empties the journal
    /// ([`Status::Unsupported`] for a store not opened durable).
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Status, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Cosine)?;
    /// assert_eq!(store.checkpoint().unwrap_err().status, Status::Unsupported);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn checkpoint(&self) -> Result<()> {
        // SAFETY: live store; the library serialises it with the writes.
        check(unsafe { sys::mnemo_store_checkpoint(self.raw()) })
    }

    /// Counts and sizes of the store.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Cosine)?;
    /// let stats = store.stats()?;
    /// assert!(!stats.durable);
    /// assert_eq!(stats.vectors, 0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn stats(&self) -> Result<StoreStats> {
        // SAFETY: a plain C struct; all-zero is a valid value.
        let mut raw: sys::mnemo_store_statistics = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::mnemo_store_statistics>() as u32;
        // SAFETY: live store; raw is a valid place of the size it states.
        check(unsafe { sys::mnemo_store_stats(self.raw(), &mut raw) })?;
        Ok(StoreStats {
            durable: raw.durable != 0,
            vectors: raw.vectors,
            tombstones: raw.tombstones,
            slots: raw.slots,
            host_bytes: raw.host_bytes,
            device_bytes: raw.device_bytes,
            journal_records: raw.journal_records,
            journal_bytes: raw.journal_bytes,
            sequence: raw.sequence,
            filtered_on_device: raw.filtered_on_device,
            filtered_on_host: raw.filtered_on_host,
            filtered_ranged: raw.filtered_ranged,
        })
    }
}
