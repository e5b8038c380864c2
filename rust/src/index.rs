//! Sublinear recall: an inverted-file (IVF) index on a store
//! (`mnemo_store_build_index`, `mnemo_store_drop_index`,
//! `mnemo_store_wait_index`, `mnemo_store_index_info`), searched with
//! [`SearchOptions::nprobe`](crate::SearchOptions::nprobe).

use crate::dtype::Storage;
use crate::error::{check, Result};
use crate::store::Store;
use crate::sys;

/// How [`Store::build_index`] trains and lays out the index, and when the
/// store rebuilds it by itself (`mnemo_index_options`). The defaults are
/// those of `mnemo_index_options_default()`.
///
/// ```
/// use mnemo::IndexOptions;
/// let opts = IndexOptions::new().nlist(256).train_iters(20).seed(7).background(false);
/// assert_eq!(opts.nlist, 256);
/// assert_eq!(IndexOptions::default().rebuild_hot_min, 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexOptions {
    /// Number of lists (k-means centroids); 0 (default): `round(sqrt(count))`,
    /// at least 1. A store with fewer memories than lists gets one list per
    /// memory. Below 2^23.
    pub nlist: u32,
    /// k-means iterations; 0 (default): 10.
    pub train_iters: u32,
    /// Training sample rows per list; 0 (default): 256.
    pub train_per_list: u32,
    /// Seed of the training sample and the initial centroids (default 1).
    pub seed: u64,
    /// Rebuild when the hot tier (memories written since the last build)
    /// holds more than this fraction of the indexed memories, and at least
    /// [`IndexOptions::rebuild_hot_min`]. `> 0`; `f64::INFINITY`: never
    /// rebuild for the hot tier. Default 0.25.
    pub rebuild_hot_fraction: f64,
    /// The smallest hot tier that triggers a rebuild (default 4096).
    pub rebuild_hot_min: u64,
    /// Rebuild when the largest list holds more than this many times the
    /// mean list. `> 0`; `f64::INFINITY`: never rebuild for skew. Default 8.
    pub rebuild_skew: f64,
    /// `true` (default): automatic rebuilds run on a thread of the store
    /// while searches go on with the old index; `false`: inside the write
    /// that triggers them.
    pub background: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            nlist: 0,
            train_iters: 0,
            train_per_list: 0,
            seed: 1,
            rebuild_hot_fraction: 0.25,
            rebuild_hot_min: 4096,
            rebuild_skew: 8.0,
            background: true,
        }
    }
}

impl IndexOptions {
    /// The defaults: lists, iterations and sample chosen by the library,
    /// seed 1, rebuilds in the background.
    ///
    /// ```
    /// let opts = mnemo::IndexOptions::new();
    /// assert_eq!((opts.nlist, opts.seed, opts.background), (0, 1, true));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the number of lists (0: `round(sqrt(count))`).
    pub fn nlist(mut self, nlist: u32) -> Self {
        self.nlist = nlist;
        self
    }

    /// Sets the k-means iterations (0: the library's default, 10).
    pub fn train_iters(mut self, iters: u32) -> Self {
        self.train_iters = iters;
        self
    }

    /// Sets the training sample rows per list (0: the library's default, 64).
    pub fn train_per_list(mut self, rows: u32) -> Self {
        self.train_per_list = rows;
        self
    }

    /// Sets the seed of the training sample and initial centroids.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the hot-tier fraction that triggers a rebuild.
    pub fn rebuild_hot_fraction(mut self, fraction: f64) -> Self {
        self.rebuild_hot_fraction = fraction;
        self
    }

    /// Sets the smallest hot tier that triggers a rebuild.
    pub fn rebuild_hot_min(mut self, min: u64) -> Self {
        self.rebuild_hot_min = min;
        self
    }

    /// Sets the list skew (largest / mean) that triggers a rebuild.
    pub fn rebuild_skew(mut self, skew: f64) -> Self {
        self.rebuild_skew = skew;
        self
    }

    /// Sets whether automatic rebuilds run on a background thread.
    pub fn background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// The C struct; the library checks the values.
    fn to_raw(self) -> sys::mnemo_index_options {
        // SAFETY: plain function returning a struct by value.
        let mut raw = unsafe { sys::mnemo_index_options_default() };
        raw.nlist = self.nlist;
        raw.train_iters = self.train_iters;
        raw.train_per_list = self.train_per_list;
        raw.seed = self.seed;
        raw.rebuild_hot_fraction = self.rebuild_hot_fraction;
        raw.rebuild_hot_min = self.rebuild_hot_min;
        raw.rebuild_skew = self.rebuild_skew;
        raw.background = self.background as u32;
        raw
    }
}

/// The state of a store's index (`mnemo_index_info`). A sharded store
/// reports the counts summed over its shards; `nlist` is the list count of
/// the centroids its shards share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexInfo {
    /// Lists; 0: the store has no index.
    pub nlist: u32,
    /// Live memories in lists.
    pub indexed: u64,
    /// Live memories in the hot tier (written since the last build; always
    /// scanned exactly).
    pub hot: u64,
    /// Slots of the largest list.
    pub largest_list: u64,
    /// Builds and rebuilds since the store was opened.
    pub builds: u64,
    /// A background rebuild is under way.
    pub rebuilding: bool,
    /// Wall time of the last build or rebuild, in seconds.
    pub last_build_seconds: f64,
}

impl<T: Storage> Store<T> {
    /// Builds (or rebuilds) the store's inverted-file index and returns when
    /// it is in place: k-means centroids trained on a sample of the
    /// memories, every memory assigned to its best list and the slots laid
    /// out list by list. Searches with
    /// [`SearchOptions::nprobe`](crate::SearchOptions::nprobe) `> 0` then
    /// read only that many lists
    /// plus the hot tier: memories written after the build (new ones and
    /// upserted ones, whose slots change), always scanned exactly, so a new
    /// memory is found at once. The store rebuilds the index by itself as
    /// [`IndexOptions`] says. A background rebuild under way is waited for
    /// first. In a durable store the layout is journaled before this returns
    /// and saved in snapshots; [`Store::save`] keeps it too.
    ///
    /// Errors: [`Status::InvalidArgument`](crate::Status::InvalidArgument)
    /// (a fraction or skew not `> 0`, `nlist >= 2^23`),
    /// [`Status::Io`](crate::Status::Io) (a durable store's journal cannot be
    /// written: the previous layout stays),
    /// [`Status::OutOfMemory`](crate::Status::OutOfMemory).
    ///
    /// ```
    /// use mnemo::{AlignedVec, IndexOptions, Metric, Runtime, SearchOptions, Store};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let store = Store::<f32>::new(&rt, 2, Metric::Cosine)?;
    /// let ids: AlignedVec<u64> = (0..100u64).collect();
    /// let v: AlignedVec<f32> = (0..200).map(|i| ((i * 7 % 13) as f32) - 6.5).collect();
    /// store.add(&ids, &v)?;
    /// store.build_index(&IndexOptions::new().nlist(4))?;
    /// assert_eq!(store.index_info()?.nlist, 4);
    /// let q = AlignedVec::from_slice(&[1.0, 0.5]);
    /// let hits = store.search_with(&q, 5, &SearchOptions::new().nprobe(2))?;
    /// assert!(!hits[0].is_empty());
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn build_index(&self, opts: &IndexOptions) -> Result<()> {
        let raw = opts.to_raw();
        // SAFETY: live store; raw is a complete options struct that outlives
        // the call. The library serialises the re-layout with other writes.
        check(unsafe { sys::mnemo_store_build_index(self.raw(), &raw) })
    }

    /// Removes the index; searches then always scan every memory, whatever
    /// their `nprobe`. Waits for a background rebuild first; journaled in a
    /// durable store. A store without an index is left as it is.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Dot)?;
    /// store.drop_index()?; // no index: nothing to do
    /// assert_eq!(store.index_info()?.nlist, 0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn drop_index(&self) -> Result<()> {
        // SAFETY: live store.
        check(unsafe { sys::mnemo_store_drop_index(self.raw()) })
    }

    /// Waits until no background rebuild is under way. A background rebuild
    /// that failed left the previous index in place; its error is returned
    /// here.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Dot)?;
    /// store.wait_index()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn wait_index(&self) -> Result<()> {
        // SAFETY: live store.
        check(unsafe { sys::mnemo_store_wait_index(self.raw()) })
    }

    /// The state of the store's index: lists, indexed and hot memories,
    /// builds, whether a rebuild is under way.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Dot)?;
    /// let info = store.index_info()?;
    /// assert_eq!((info.nlist, info.indexed, info.rebuilding), (0, 0, false));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn index_info(&self) -> Result<IndexInfo> {
        // SAFETY: a plain C struct; all-zero is a valid value.
        let mut raw: sys::mnemo_index_info = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::mnemo_index_info>() as u32;
        // SAFETY: live store; raw is a valid place of the size it states.
        check(unsafe { sys::mnemo_store_index_info(self.raw(), &mut raw) })?;
        Ok(IndexInfo {
            nlist: raw.nlist,
            indexed: raw.indexed,
            hot: raw.hot,
            largest_list: raw.largest_list,
            builds: raw.builds,
            rebuilding: raw.rebuilding != 0,
            last_build_seconds: raw.last_build_seconds,
        })
    }
}
