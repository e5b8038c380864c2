//! The memory store: ids and vectors, searched by similarity with top-k.

use std::ffi::CString;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::aligned::{expect_len, in_ptr, out_ptr, product, rows_of, AlignedVec, OutScalar};
use crate::dtype::{DType, Storage};
use crate::error::{check, Error, Result, Status};
use crate::ops::Metric;
use crate::runtime::{RawRuntime, Runtime};
use crate::sys;

/// The id the library writes into result slots that have no candidate;
/// never a valid id.
///
/// ```
/// use mnemo::{AlignedVec, Metric, Runtime, Status, Store, NO_ID};
/// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
/// let err = store.add(&AlignedVec::from_slice(&[NO_ID]), &AlignedVec::from_slice(&[1.0])).unwrap_err();
/// assert_eq!(err.status, Status::OutOfRange);
/// # Ok::<(), mnemo::Error>(())
/// ```
pub const NO_ID: u64 = sys::MNEMO_NO_ID;

/// One search result: a stored id and its score (including the bias when
/// the search applies it).
///
/// ```
/// let hit = mnemo::Hit { id: 7, score: 0.9 };
/// assert_eq!(hit.id, 7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The stored id.
    pub id: u64,
    /// Cosine or dot similarity (higher is better) or squared L2 distance
    /// (lower is better).
    pub score: f32,
}

/// Which stored vectors a search may return.
///
/// ```
/// use mnemo::Filter;
/// let allowed = mnemo::AlignedVec::from_slice(&[1u64, 5]);
/// let f = Filter::Ids(&allowed);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub enum Filter<'a> {
    /// Every stored vector.
    #[default]
    None,
    /// Only these ids (unknown ids are ignored).
    Ids(&'a [u64]),
    /// Only the slots whose bit is set: bit `s % 64` of word `s / 64` allows
    /// slot `s` (see [`Store::slot_of`]). `slot_count` must equal
    /// [`Store::slot_count`] and `words` must hold `ceil(slot_count / 64)`
    /// words.
    SlotBitmap {
        /// The bitmap words.
        words: &'a [u64],
        /// Number of slots the bitmap covers.
        slot_count: u64,
    },
}

/// Options of [`Store::search_with`].
///
/// ```
/// use mnemo::{Filter, SearchOptions};
/// let ids = mnemo::AlignedVec::from_slice(&[3u64]);
/// let opts = SearchOptions::new().filter(Filter::Ids(&ids)).apply_bias(true);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchOptions<'a> {
    /// Which vectors may be returned.
    pub filter: Filter<'a>,
    /// Rank by score + bias (cosine, dot) or distance - bias (L2), so a
    /// positive bias favours a memory; returned scores include it.
    pub apply_bias: bool,
}

impl<'a> SearchOptions<'a> {
    /// No filter, no bias.
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new();
    /// assert!(!opts.apply_bias);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the filter.
    ///
    /// ```
    /// let ids = mnemo::AlignedVec::from_slice(&[1u64]);
    /// let opts = mnemo::SearchOptions::new().filter(mnemo::Filter::Ids(&ids));
    /// ```
    pub fn filter(mut self, filter: Filter<'a>) -> Self {
        self.filter = filter;
        self
    }

    /// Sets whether the per-memory bias is applied.
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new().apply_bias(true);
    /// assert!(opts.apply_bias);
    /// ```
    pub fn apply_bias(mut self, apply: bool) -> Self {
        self.apply_bias = apply;
        self
    }

    /// The C struct, after the checks that keep the library inside the
    /// caller's slices.
    fn to_raw(self) -> Result<sys::mnemo_search_options> {
        // SAFETY: plain function returning a struct by value.
        let mut raw = unsafe { sys::mnemo_search_options_default() };
        raw.apply_bias = self.apply_bias as u32;
        match self.filter {
            Filter::None => raw.filter_kind = sys::MNEMO_FILTER_NONE as i32,
            Filter::Ids(ids) => {
                raw.filter_kind = sys::MNEMO_FILTER_IDS as i32;
                raw.filter_ids = in_ptr(ids, "filter ids")?;
                raw.filter_count = ids.len() as u64;
            }
            Filter::SlotBitmap { words, slot_count } => {
                let needed = slot_count.div_ceil(64);
                if words.len() as u64 != needed {
                    return Err(Error::shape(format!(
                        "filter bitmap: has {} words, {slot_count} slots need {needed}",
                        words.len()
                    )));
                }
                raw.filter_kind = sys::MNEMO_FILTER_SLOT_BITMAP as i32;
                raw.filter_bitmap = in_ptr(words, "filter bitmap")?;
                raw.filter_count = slot_count;
            }
        }
        Ok(raw)
    }
}

/// A set of `dim`-dimensional vectors stored as `T` (`f32`, [`F16`](crate::F16)
/// or [`Bf16`](crate::Bf16)) under caller-chosen `u64` ids, searched with
/// one metric.
///
/// A store lives on its runtime's backend (resident on the GPU for a CUDA
/// runtime) and keeps the runtime alive. It may be searched from many threads
/// at once; writes (add, remove, set_bias) take `&self` because the library
/// serialises them itself.
///
/// ```
/// use mnemo::{AlignedVec, Metric, Runtime, Store};
/// let rt = Runtime::builder().cpu().build()?;
/// let store = Store::<f32>::new(&rt, 2, Metric::Cosine)?;
/// let ids = AlignedVec::from_slice(&[10u64, 20]);
/// store.add(&ids, &AlignedVec::from_slice(&[1.0, 0.0, 0.0, 1.0]))?;
/// let hits = store.search(&AlignedVec::from_slice(&[0.9, 0.1]), 1)?;
/// assert_eq!(hits[0][0].id, 10);
/// # Ok::<(), mnemo::Error>(())
/// ```
pub struct Store<T: Storage> {
    ptr: NonNull<sys::mnemo_store>,
    dim: usize,
    metric: Metric,
    // Keeps the runtime alive: mnemo.h requires it to outlive its stores.
    // Fields drop after Drop::drop has destroyed the store.
    rt: Arc<RawRuntime>,
    _element: PhantomData<T>,
}

// SAFETY: mnemo.h allows a store to be used from any thread; destroy never
// runs alongside other calls because it needs the store by value.
unsafe impl<T: Storage> Send for Store<T> {}
// SAFETY: mnemo.h: "A store may be searched from many threads at once;
// writes (add, remove, set_bias) are exclusive and are serialised by the
// store itself", so every `&self` method may run concurrently.
unsafe impl<T: Storage> Sync for Store<T> {}

impl<T: Storage> Drop for Store<T> {
    fn drop(&mut self) {
        // SAFETY: the handle came from create/open and is destroyed once; the
        // runtime is still alive (self.rt), and &mut self excludes other calls.
        unsafe { sys::mnemo_store_destroy(self.ptr.as_ptr()) };
    }
}

impl<T: Storage> std::fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dtype", &T::DTYPE)
            .field("dim", &self.dim)
            .field("metric", &self.metric)
            .finish()
    }
}

impl<T: Storage> Store<T> {
    /// An empty store of `dim`-dimensional vectors (1 to 65536).
    ///
    /// ```
    /// use mnemo::{Bf16, Metric, Runtime, Store};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let store = Store::<Bf16>::new(&rt, 384, Metric::Dot)?;
    /// assert_eq!(store.count()?, 0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn new(rt: &Runtime, dim: usize, metric: Metric) -> Result<Self> {
        let mut out: *mut sys::mnemo_store = std::ptr::null_mut();
        // SAFETY: the runtime handle is live; out is a valid place.
        check(unsafe {
            sys::mnemo_store_create(
                rt.ptr(),
                dim as u64,
                T::DTYPE.code(),
                metric.code(),
                &mut out,
            )
        })?;
        Self::wrap(rt, out)
    }

    /// Opens a store written by [`Store::save`]; its dtype must be `T`
    /// (else [`Status::Dtype`]).
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let store = Store::<f32>::new(&rt, 3, Metric::L2Sq)?;
    /// store.add(&AlignedVec::from_slice(&[1u64]), &AlignedVec::from_slice(&[1.0, 2.0, 3.0]))?;
    /// let path = std::env::temp_dir().join(format!("mnemo-doc-{}.store", std::process::id()));
    /// store.save(&path)?;
    /// let back = Store::<f32>::open(&rt, &path)?;
    /// assert_eq!(back.get(1)?.as_slice(), &[1.0, 2.0, 3.0]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn open(rt: &Runtime, path: impl AsRef<Path>) -> Result<Self> {
        let c_path = path_to_c(path.as_ref())?;
        let mut out: *mut sys::mnemo_store = std::ptr::null_mut();
        // SAFETY: live runtime, NUL-terminated path, valid out place.
        check(unsafe { sys::mnemo_store_open(rt.ptr(), c_path.as_ptr(), &mut out) })?;
        let store = Self::wrap(rt, out)?;
        let stored = store.stored_dtype()?;
        if stored != Some(T::DTYPE) {
            return Err(Error::new(
                Status::Dtype,
                format!(
                    "{}: the store holds {stored:?} vectors, not {:?}",
                    path.as_ref().display(),
                    T::DTYPE
                ),
            ));
        }
        Ok(store)
    }

    /// Takes ownership of a fresh handle and reads its shape.
    pub(crate) fn wrap(rt: &Runtime, out: *mut sys::mnemo_store) -> Result<Self> {
        let ptr = NonNull::new(out).ok_or_else(|| {
            Error::new(Status::Internal, "the library returned OK without a store")
        })?;
        let mut store = Store {
            ptr,
            dim: 0,
            metric: Metric::Cosine,
            rt: Arc::clone(&rt.raw),
            _element: PhantomData,
        };
        let (mut dim, mut metric) = (OutScalar(0u64), OutScalar(0i32));
        // SAFETY: live store; both outs are valid places, dtype may be NULL.
        check(unsafe {
            sys::mnemo_store_shape(store.raw(), &mut dim.0, std::ptr::null_mut(), &mut metric.0)
        })?;
        let (dim, metric) = (dim.0, metric.0);
        store.dim = usize::try_from(dim).map_err(|_| Error::overflow("store dim"))?;
        store.metric = Metric::from_code(metric).ok_or_else(|| {
            Error::new(
                Status::Internal,
                format!("store has unknown metric {metric}"),
            )
        })?;
        Ok(store)
    }

    pub(crate) fn stored_dtype(&self) -> Result<Option<DType>> {
        let mut dtype = OutScalar(0i32);
        // SAFETY: live store; dtype is a valid place, the others may be NULL.
        check(unsafe {
            sys::mnemo_store_shape(
                self.raw(),
                std::ptr::null_mut(),
                &mut dtype.0,
                std::ptr::null_mut(),
            )
        })?;
        Ok(DType::from_code(dtype.0))
    }

    pub(crate) fn raw(&self) -> *mut sys::mnemo_store {
        self.ptr.as_ptr()
    }

    /// Vector dimension.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 8, Metric::Dot)?;
    /// assert_eq!(store.dim(), 8);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The search metric.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 8, Metric::Dot)?;
    /// assert_eq!(store.metric(), Metric::Dot);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The runtime this store lives on.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 8, Metric::Dot)?;
    /// let info = store.runtime().info()?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn runtime(&self) -> Runtime {
        Runtime {
            raw: Arc::clone(&self.rt),
        }
    }

    /// Adds (or replaces: upsert, keeping slot and bias) one vector per id.
    /// `vectors` is f32 `[ids.len() x dim]`, rounded to nearest even for an
    /// f16/bf16 store. Within one call a repeated id takes the last vector.
    ///
    /// ```
    /// use mnemo::{AlignedVec, F16, Metric, Runtime, Store};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let store = Store::<F16>::new(&rt, 2, Metric::Cosine)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[0.1, 0.2, 0.3, 0.4]))?;
    /// assert_eq!(store.count()?, 2);
    /// assert_eq!(store.get(1)?[0], F16::from_f32(0.1).to_f32());
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add(&self, ids: &[u64], vectors: &[f32]) -> Result<()> {
        self.add_typed(ids, vectors)
    }

    /// Like [`Store::add`], with vectors already in the store's element type.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Bf16, Metric, Runtime, Store};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let store = Store::<Bf16>::new(&rt, 2, Metric::Dot)?;
    /// let v: AlignedVec<Bf16> = [1.0f32, 2.0].iter().map(|&x| Bf16::from_f32(x)).collect();
    /// store.add_native(&AlignedVec::from_slice(&[9u64]), &v)?;
    /// assert_eq!(store.get(9)?.as_slice(), &[1.0, 2.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add_native(&self, ids: &[u64], vectors: &[T]) -> Result<()> {
        self.add_typed(ids, vectors)
    }

    fn add_typed<V: Storage>(&self, ids: &[u64], vectors: &[V]) -> Result<()> {
        expect_len(
            vectors.len(),
            product(ids.len(), self.dim, "vectors")?,
            "vectors",
        )?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let vec_ptr = in_ptr(vectors, "vectors")?;
        // SAFETY: live store; ids has count entries and vectors count * dim
        // elements of V::DTYPE, both checked and aligned above.
        check(unsafe {
            sys::mnemo_store_add(
                self.raw(),
                ids_ptr,
                vec_ptr.cast(),
                V::DTYPE.code(),
                ids.len() as u64,
            )
        })
    }

    /// Removes the ids that are present; returns how many were.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// assert_eq!(store.remove(&AlignedVec::from_slice(&[2u64, 3]))?, 1);
    /// assert_eq!(store.count()?, 1);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn remove(&self, ids: &[u64]) -> Result<u64> {
        let ids_ptr = in_ptr(ids, "ids")?;
        let mut removed = OutScalar(0u64);
        // SAFETY: live store; ids is aligned with ids.len() entries; removed
        // is a valid, aligned place.
        check(unsafe {
            sys::mnemo_store_remove(self.raw(), ids_ptr, ids.len() as u64, &mut removed.0)
        })?;
        Ok(removed.0)
    }

    /// Number of stored vectors.
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// assert_eq!(store.count()?, 0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn count(&self) -> Result<u64> {
        let mut n = OutScalar(0u64);
        // SAFETY: live store, valid out place.
        check(unsafe { sys::mnemo_store_count(self.raw(), &mut n.0) })?;
        Ok(n.0)
    }

    /// The stored (rounded) vector of `id`, as f32.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store, Status};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 2, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[4u64]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// assert_eq!(store.get(4)?.as_slice(), &[1.0, 2.0]);
    /// assert_eq!(store.get(5).unwrap_err().status, Status::NotFound);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn get(&self, id: u64) -> Result<AlignedVec<f32>> {
        let mut out = AlignedVec::from_elem(0.0f32, self.dim);
        self.get_into(id, &mut out)?;
        Ok(out)
    }

    /// Like [`Store::get`], into a caller buffer of `dim` elements.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 2, Metric::Dot)?;
    /// # store.add(&AlignedVec::from_slice(&[4u64]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// let mut buf = AlignedVec::from_elem(0.0f32, 2);
    /// store.get_into(4, &mut buf)?;
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn get_into(&self, id: u64, out: &mut [f32]) -> Result<()> {
        expect_len(out.len(), self.dim, "out")?;
        let out_ptr = out_ptr(out, "out")?;
        // SAFETY: live store; out is aligned and holds dim floats.
        check(unsafe { sys::mnemo_store_get(self.raw(), id, out_ptr) })
    }

    /// Number of slots (live vectors plus freed slots not yet compacted);
    /// the length a slot bitmap filter must have.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// assert_eq!(store.slot_count()?, 2);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn slot_count(&self) -> Result<u64> {
        let mut n = OutScalar(0u64);
        // SAFETY: live store, valid out place.
        check(unsafe { sys::mnemo_store_slot_count(self.raw(), &mut n.0) })?;
        Ok(n.0)
    }

    /// The slot of `id`, for building a [`Filter::SlotBitmap`].
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[7u64]), &AlignedVec::from_slice(&[1.0]))?;
    /// assert_eq!(store.slot_of(7)?, 0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn slot_of(&self, id: u64) -> Result<u64> {
        let mut slot = OutScalar(0u64);
        // SAFETY: live store, valid out place.
        check(unsafe { sys::mnemo_store_slot_of(self.raw(), id, &mut slot.0) })?;
        Ok(slot.0)
    }

    /// A slot bitmap allowing exactly the given ids (unknown ids are
    /// skipped), sized for the store as it is now.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Filter, Metric, Runtime, SearchOptions, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// let (words, slot_count) = store.slot_bitmap(&[1])?;
    /// let opts = SearchOptions::new().filter(Filter::SlotBitmap { words: &words, slot_count });
    /// let hits = store.search_with(&AlignedVec::from_slice(&[1.0]), 2, &opts)?;
    /// assert_eq!(hits[0].len(), 1);
    /// assert_eq!(hits[0][0].id, 1);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn slot_bitmap(&self, ids: &[u64]) -> Result<(AlignedVec<u64>, u64)> {
        let slot_count = self.slot_count()?;
        let words =
            usize::try_from(slot_count.div_ceil(64)).map_err(|_| Error::overflow("slot bitmap"))?;
        let mut bitmap = AlignedVec::from_elem(0u64, words);
        for &id in ids {
            match self.slot_of(id) {
                Ok(slot) if slot < slot_count => bitmap[(slot / 64) as usize] |= 1 << (slot % 64),
                Ok(_) => {}
                Err(e) if e.status == Status::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok((bitmap, slot_count))
    }

    /// Sets the additive bias of each id (it starts at 0 and survives
    /// upserts). Fails with [`Status::NotFound`] and changes nothing if an id
    /// is absent.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, SearchOptions, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[1.0, 0.5]))?;
    /// store.set_bias(&AlignedVec::from_slice(&[2u64]), &AlignedVec::from_slice(&[1.0]))?;
    /// let opts = SearchOptions::new().apply_bias(true);
    /// let hits = store.search_with(&AlignedVec::from_slice(&[1.0]), 1, &opts)?;
    /// assert_eq!(hits[0][0].id, 2);
    /// assert_eq!(hits[0][0].score, 1.5);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn set_bias(&self, ids: &[u64], biases: &[f32]) -> Result<()> {
        expect_len(biases.len(), ids.len(), "biases")?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let bias_ptr = in_ptr(biases, "biases")?;
        // SAFETY: live store; both arrays aligned with ids.len() entries.
        check(unsafe { sys::mnemo_store_set_bias(self.raw(), ids_ptr, bias_ptr, ids.len() as u64) })
    }

    /// The `k` best stored vectors for each query (f32 `[nq x dim]`), best
    /// first, ties broken by the smaller id. Rows hold fewer than `k` hits
    /// when fewer candidates exist.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::L2Sq)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2, 3]), &AlignedVec::from_slice(&[0.0, 1.0, 3.0]))?;
    /// let hits = store.search(&AlignedVec::from_slice(&[0.9, 2.9]), 2)?;
    /// assert_eq!(hits[0].iter().map(|h| h.id).collect::<Vec<_>>(), [2, 1]);
    /// assert_eq!(hits[1][0].id, 3);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        self.search_with(queries, k, &SearchOptions::default())
    }

    /// Like [`Store::search`], with a filter and/or the bias.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Filter, Metric, Runtime, SearchOptions, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[1u64, 2]), &AlignedVec::from_slice(&[1.0, 2.0]))?;
    /// let allowed = AlignedVec::from_slice(&[1u64]);
    /// let opts = SearchOptions::new().filter(Filter::Ids(&allowed));
    /// let hits = store.search_with(&AlignedVec::from_slice(&[1.0]), 5, &opts)?;
    /// assert_eq!(hits[0], vec![mnemo::Hit { id: 1, score: 1.0 }]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn search_with(
        &self,
        queries: &[f32],
        k: usize,
        opts: &SearchOptions<'_>,
    ) -> Result<Vec<Vec<Hit>>> {
        let nq = rows_of(queries.len(), self.dim, "queries")?;
        // Slots past the number of stored vectors can only hold padding, so
        // a huge k need not mean a huge buffer. (k = 0 still reaches the
        // library, which refuses it.) A concurrent add after this count is
        // simply ordered after the search.
        let stored = usize::try_from(self.count()?).unwrap_or(usize::MAX);
        let k = k.min(stored.max(1));
        let total = product(nq, k, "results (nq * k)")?;
        let mut ids = AlignedVec::from_elem(NO_ID, total);
        let mut scores = AlignedVec::from_elem(f32::NAN, total);
        self.search_into(queries, k, opts, &mut ids, &mut scores)?;
        Ok((0..nq)
            .map(|q| {
                let row = q * k..(q + 1) * k;
                ids[row.clone()]
                    .iter()
                    .zip(&scores[row])
                    .filter(|(&id, _)| id != NO_ID)
                    .map(|(&id, &score)| Hit { id, score })
                    .collect()
            })
            .collect())
    }

    /// The raw search: fills `ids` and `scores` (`[nq x k]` each); slots
    /// without a candidate get [`NO_ID`] and NaN. Nothing is written on
    /// error.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, SearchOptions, Store, NO_ID};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add(&AlignedVec::from_slice(&[5u64]), &AlignedVec::from_slice(&[2.0]))?;
    /// let mut ids = AlignedVec::from_elem(0u64, 2);
    /// let mut scores = AlignedVec::from_elem(0.0f32, 2);
    /// store.search_into(&AlignedVec::from_slice(&[1.0]), 2, &SearchOptions::new(), &mut ids, &mut scores)?;
    /// assert_eq!(&ids[..], &[5, NO_ID]);
    /// assert_eq!(scores[0], 2.0);
    /// assert!(scores[1].is_nan());
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn search_into(
        &self,
        queries: &[f32],
        k: usize,
        opts: &SearchOptions<'_>,
        ids: &mut [u64],
        scores: &mut [f32],
    ) -> Result<()> {
        let nq = rows_of(queries.len(), self.dim, "queries")?;
        let total = product(nq, k, "results (nq * k)")?;
        expect_len(ids.len(), total, "ids")?;
        expect_len(scores.len(), total, "scores")?;
        let raw_opts = opts.to_raw()?;
        let q_ptr = in_ptr(queries, "queries")?;
        let ids_ptr = out_ptr(ids, "ids")?;
        let scores_ptr = out_ptr(scores, "scores")?;
        // SAFETY: live store; queries holds nq * dim floats, ids and scores
        // nq * k entries each, filters the lengths to_raw checked; all aligned.
        check(unsafe {
            sys::mnemo_store_search(
                self.raw(),
                q_ptr,
                nq as u64,
                k as u64,
                &raw_opts,
                ids_ptr,
                scores_ptr,
            )
        })
    }

    /// Writes the store to `path` atomically (temporary file, then rename).
    ///
    /// ```
    /// # use mnemo::{Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 4, Metric::Cosine)?;
    /// let path = std::env::temp_dir().join(format!("mnemo-save-{}.store", std::process::id()));
    /// store.save(&path)?;
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let c_path = path_to_c(path.as_ref())?;
        // SAFETY: live store, NUL-terminated path.
        check(unsafe { sys::mnemo_store_save(self.raw(), c_path.as_ptr()) })
    }
}

pub(crate) fn path_to_c(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    CString::new(bytes)
        .map_err(|_| Error::invalid(format!("path {} contains a NUL byte", path.display())))
}
