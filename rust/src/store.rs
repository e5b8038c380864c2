//! The memory store: ids and vectors, searched by similarity with top-k.

use std::ffi::CString;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::aligned::{
    expect_len, in_ptr, opt_in_ptr, out_ptr, product, rows_of, AlignedVec, OutScalar,
};
use crate::dtype::{DType, Storage};
use crate::error::{check, Error, Result, Status};
use crate::filter::Where;
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

/// Which stored vectors a search may return, by id or slot. For what
/// memories hold (namespaces, tags, attributes, keys, times) see [`Where`]
/// and [`SearchOptions::where_`].
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

/// How an activation search ranks memories: memory `i` scores
///
/// ```text
/// w_relevance * rel_i + w_recency * 2^(-(now - t_i) / half_life) + w_importance * imp_i
/// ```
///
/// (plus its bias with [`SearchOptions::apply_bias`]), where `rel_i` is the
/// cosine or dot score, `t_i` the memory's last-access time (a time after
/// `now` counts as now) and `imp_i` its importance. For [`Metric::L2Sq`]
/// `rel_i` is the negated distance and the returned score is the negated
/// activation, so lower stays better. The library checks the values: a
/// weight that is not finite or a `half_life` not `> 0` is
/// [`Status::InvalidArgument`].
///
/// ```
/// use mnemo::Activation;
/// // Generative Agents: decay 0.995 per hour, every term min-max scaled.
/// let a = Activation::new()
///     .w_recency(1.0)
///     .w_importance(1.0)
///     .half_life(3600.0 * std::f64::consts::LN_2 / -(0.995f64.ln()))
///     .normalize(true);
/// assert_eq!(a.w_relevance, 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activation {
    /// Weight of the similarity (default 1).
    pub w_relevance: f32,
    /// Weight of the recency `2^(-(now - t) / half_life)` (default 0).
    pub w_recency: f32,
    /// Weight of the importance (default 0).
    pub w_importance: f32,
    /// Seconds after which recency halves; `> 0`, may be `f64::INFINITY`
    /// (no decay). Default one day.
    pub half_life: f64,
    /// Min-max scale each of relevance, recency and importance to `[0, 1]`
    /// over the query's candidates first (0.5 for all when they are equal).
    pub normalize: bool,
}

impl Default for Activation {
    fn default() -> Self {
        Activation {
            w_relevance: 1.0,
            w_recency: 0.0,
            w_importance: 0.0,
            half_life: 86400.0,
            normalize: false,
        }
    }
}

impl Activation {
    /// Relevance alone (weights 1, 0, 0), a half-life of one day, no
    /// normalisation.
    ///
    /// ```
    /// let a = mnemo::Activation::new();
    /// assert_eq!((a.w_recency, a.half_life, a.normalize), (0.0, 86400.0, false));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the weight of the similarity.
    pub fn w_relevance(mut self, w: f32) -> Self {
        self.w_relevance = w;
        self
    }

    /// Sets the weight of the recency.
    pub fn w_recency(mut self, w: f32) -> Self {
        self.w_recency = w;
        self
    }

    /// Sets the weight of the importance.
    pub fn w_importance(mut self, w: f32) -> Self {
        self.w_importance = w;
        self
    }

    /// Sets the half-life in seconds.
    pub fn half_life(mut self, seconds: f64) -> Self {
        self.half_life = seconds;
        self
    }

    /// Sets whether the terms are min-max scaled over the candidates.
    pub fn normalize(mut self, normalize: bool) -> Self {
        self.normalize = normalize;
        self
    }
}

/// What [`Store::get_meta`] returns: one entry per id asked for, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryMeta {
    /// Last-access times (seconds; 0 when never given).
    pub times: AlignedVec<f64>,
    /// Importances (0 when never given).
    pub importance: AlignedVec<f32>,
    /// Additive biases (see [`Store::set_bias`]).
    pub biases: AlignedVec<f32>,
}

/// Options of [`Store::search_with`].
///
/// ```
/// use mnemo::{Activation, Filter, SearchOptions};
/// let ids = mnemo::AlignedVec::from_slice(&[3u64]);
/// let opts = SearchOptions::new().filter(Filter::Ids(&ids)).apply_bias(true);
/// let sublinear = SearchOptions::new().nprobe(8); // needs Store::build_index
/// let recent = SearchOptions::new()
///     .activation(Activation::new().w_recency(1.0).half_life(3600.0))
///     .now(1.7e9)
///     .touch(true);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchOptions<'a> {
    /// Which vectors may be returned.
    pub filter: Filter<'a>,
    /// Rank by score + bias (cosine, dot) or distance - bias (L2), so a
    /// positive bias favours a memory; returned scores include it.
    pub apply_bias: bool,
    /// `Some`: rank by activation (relevance, recency, importance) instead
    /// of similarity alone.
    pub activation: Option<Activation>,
    /// The present, in seconds on the clock of the stored times; `None`: the
    /// UNIX time of the call. Needs `activation`.
    pub now: Option<f64>,
    /// Set the returned memories' last-access times to `now`, atomically
    /// with the search (which then runs exclusively, like a write; journaled
    /// in a durable store). Needs `activation`.
    pub touch: bool,
    /// Sublinear recall on a store with an index ([`Store::build_index`]):
    /// `n > 0` reads only the `n` lists whose centroids rank best for each
    /// query, plus the hot tier (every memory written since the index was
    /// built, scanned exactly, so a memory is found by the search after the
    /// write that stored it). 0 (default), `n >=` the store's list count, or
    /// a store without an index: the exact scan of every memory. Within the
    /// lists read, scores, ties, filters, bias and activation are those of
    /// the exact scan; how many of the exact top-k are found depends on the
    /// data and on `n` (`mnemo eval --nprobe` measures it).
    pub nprobe: u32,
    /// Only memories this expression matches, for every query (see
    /// [`Where`]). Each query gets min(k, matching memories) results, never
    /// fewer, whatever plan the store picks. Combines with `filter` and
    /// `where_each`: a memory must pass each.
    pub where_: Option<&'a Where>,
    /// One expression per query (its length must be the number of
    /// queries): query `i` searches only what `where_each[i]` matches
    /// (`None`: no expression of its own).
    pub where_each: Option<&'a [Option<Where>]>,
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

    /// Ranks by activation.
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new().activation(mnemo::Activation::new().w_recency(0.5));
    /// assert_eq!(opts.activation.unwrap().w_recency, 0.5);
    /// ```
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = Some(activation);
        self
    }

    /// Sets the present (seconds); without it the library reads the clock.
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new().activation(mnemo::Activation::new()).now(1.7e9);
    /// assert_eq!(opts.now, Some(1.7e9));
    /// ```
    pub fn now(mut self, now: f64) -> Self {
        self.now = Some(now);
        self
    }

    /// Sets whether the search touches what it returns.
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new().activation(mnemo::Activation::new()).touch(true);
    /// assert!(opts.touch);
    /// ```
    pub fn touch(mut self, touch: bool) -> Self {
        self.touch = touch;
        self
    }

    /// Sets how many lists of the store's index a search reads (0: the
    /// exact scan). See [`SearchOptions::nprobe`](Self#structfield.nprobe).
    ///
    /// ```
    /// let opts = mnemo::SearchOptions::new().nprobe(16);
    /// assert_eq!(opts.nprobe, 16);
    /// ```
    pub fn nprobe(mut self, nprobe: u32) -> Self {
        self.nprobe = nprobe;
        self
    }

    /// Searches only what `w` matches (with every query).
    ///
    /// ```
    /// use mnemo::{SearchOptions, Where};
    /// let recent = Where::attr("year").ge(2020);
    /// let opts = SearchOptions::new().where_(&recent);
    /// ```
    pub fn where_(mut self, w: &'a Where) -> Self {
        self.where_ = Some(w);
        self
    }

    /// Searches, for query `i`, only what `each[i]` matches (`None`: no
    /// expression of its own); `each` holds one entry per query.
    ///
    /// ```
    /// use mnemo::{SearchOptions, Where};
    /// let per_user = [Some(Where::namespace_under(["users", "1"])), None];
    /// let opts = SearchOptions::new().where_each(&per_user);
    /// ```
    pub fn where_each(mut self, each: &'a [Option<Where>]) -> Self {
        self.where_each = Some(each);
        self
    }

    /// The C struct, after the checks that keep the library inside the
    /// caller's slices. `each` receives the per-query filter pointers the
    /// struct points to: it must outlive the call.
    fn to_raw(
        self,
        nq: usize,
        each: &mut Vec<*const sys::mnemo_filter>,
    ) -> Result<sys::mnemo_search_options> {
        // SAFETY: plain function returning a struct by value.
        let mut raw = unsafe { sys::mnemo_search_options_default() };
        raw.apply_bias = self.apply_bias as u32;
        raw.nprobe = self.nprobe;
        match self.activation {
            Some(a) => {
                raw.activation = 1;
                raw.normalize = a.normalize as u32;
                raw.w_relevance = a.w_relevance;
                raw.w_recency = a.w_recency;
                raw.w_importance = a.w_importance;
                raw.half_life = a.half_life;
                raw.touch = self.touch as u32;
                // NaN asks the library for the current time.
                raw.now = self.now.unwrap_or(f64::NAN);
            }
            // The library would ignore `now` and refuse touch: both are mistakes.
            None if self.now.is_some() || self.touch => {
                return Err(Error::invalid(
                    "search options: now and touch need an activation",
                ));
            }
            None => {}
        }
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
        if let Some(w) = self.where_ {
            raw.where_ = w.handle()?.as_ptr();
        }
        if let Some(list) = self.where_each {
            expect_len(list.len(), nq, "where_each (one per query)")?;
            each.clear();
            for w in list {
                each.push(match w {
                    Some(w) => w.handle()?.as_ptr(),
                    None => std::ptr::null(),
                });
            }
            raw.where_each = each.as_ptr();
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

    /// Like [`Store::add`], also setting last-access times (seconds, any
    /// clock the caller keeps, typically UNIX time) and/or importances, one
    /// per id. A `Some` slice sets the value of every listed memory; `None`
    /// keeps an upserted memory's value and gives a new one 0. A NaN or
    /// infinite time or importance is [`Status::NonFinite`] and adds nothing.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 2, Metric::Cosine)?;
    /// let ids = AlignedVec::from_slice(&[1u64, 2]);
    /// let times = AlignedVec::from_slice(&[1.7e9, 1.7e9 - 3600.0]);
    /// store.add_memories(&ids, &AlignedVec::from_slice(&[1.0, 0.0, 0.0, 1.0]), Some(&times), None)?;
    /// assert_eq!(store.get_meta(&ids)?.times.as_slice(), times.as_slice());
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add_memories(
        &self,
        ids: &[u64],
        vectors: &[f32],
        times: Option<&[f64]>,
        importance: Option<&[f32]>,
    ) -> Result<()> {
        self.add_memories_typed(ids, vectors, times, importance)
    }

    /// Like [`Store::add_memories`], with vectors already in the store's
    /// element type.
    ///
    /// ```
    /// use mnemo::{AlignedVec, F16, Metric, Runtime, Store};
    /// let store = Store::<F16>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[3u64]);
    /// let v = AlignedVec::from_slice(&[F16::from_f32(0.5)]);
    /// store.add_memories_native(&ids, &v, None, Some(&AlignedVec::from_slice(&[2.5f32])))?;
    /// assert_eq!(store.get_meta(&ids)?.importance[0], 2.5);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add_memories_native(
        &self,
        ids: &[u64],
        vectors: &[T],
        times: Option<&[f64]>,
        importance: Option<&[f32]>,
    ) -> Result<()> {
        self.add_memories_typed(ids, vectors, times, importance)
    }

    fn add_memories_typed<V: Storage>(
        &self,
        ids: &[u64],
        vectors: &[V],
        times: Option<&[f64]>,
        importance: Option<&[f32]>,
    ) -> Result<()> {
        expect_len(
            vectors.len(),
            product(ids.len(), self.dim, "vectors")?,
            "vectors",
        )?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let vec_ptr = in_ptr(vectors, "vectors")?;
        let times_ptr = opt_in_ptr(times, ids.len(), "times")?;
        let imp_ptr = opt_in_ptr(importance, ids.len(), "importance")?;
        // SAFETY: live store; ids has count entries, vectors count * dim
        // elements of V::DTYPE, times and importance count entries or are
        // NULL (allowed by the header); all checked and aligned above.
        check(unsafe {
            sys::mnemo_store_add_memories(
                self.raw(),
                ids_ptr,
                vec_ptr.cast(),
                V::DTYPE.code(),
                ids.len() as u64,
                times_ptr,
                imp_ptr,
            )
        })
    }

    /// Sets the last-access time (seconds) of each id; a repeated id takes
    /// its last entry. An absent id ([`Status::NotFound`]) or a NaN or
    /// infinite time ([`Status::NonFinite`]) changes nothing.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[1u64]);
    /// store.add(&ids, &AlignedVec::from_slice(&[1.0]))?;
    /// store.set_times(&ids, &AlignedVec::from_slice(&[12.5]))?;
    /// assert_eq!(store.get_meta(&ids)?.times[0], 12.5);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn set_times(&self, ids: &[u64], times: &[f64]) -> Result<()> {
        expect_len(times.len(), ids.len(), "times")?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let times_ptr = in_ptr(times, "times")?;
        // SAFETY: live store; both arrays aligned with ids.len() entries.
        check(unsafe {
            sys::mnemo_store_set_times(self.raw(), ids_ptr, times_ptr, ids.len() as u64)
        })
    }

    /// Sets the importance of each id; errors as for [`Store::set_times`].
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[1u64]);
    /// store.add(&ids, &AlignedVec::from_slice(&[1.0]))?;
    /// store.set_importance(&ids, &AlignedVec::from_slice(&[0.75]))?;
    /// assert_eq!(store.get_meta(&ids)?.importance[0], 0.75);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn set_importance(&self, ids: &[u64], importance: &[f32]) -> Result<()> {
        expect_len(importance.len(), ids.len(), "importance")?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let imp_ptr = in_ptr(importance, "importance")?;
        // SAFETY: live store; both arrays aligned with ids.len() entries.
        check(unsafe {
            sys::mnemo_store_set_importance(self.raw(), ids_ptr, imp_ptr, ids.len() as u64)
        })
    }

    /// The last-access times, importances and biases of the ids, in order
    /// ([`Status::NotFound`] if one is absent).
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[4u64]);
    /// store.add(&ids, &AlignedVec::from_slice(&[1.0]))?;
    /// let meta = store.get_meta(&ids)?;
    /// assert_eq!((meta.times[0], meta.importance[0], meta.biases[0]), (0.0, 0.0, 0.0));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn get_meta(&self, ids: &[u64]) -> Result<MemoryMeta> {
        let n = ids.len();
        let mut meta = MemoryMeta {
            times: AlignedVec::from_elem(0.0f64, n),
            importance: AlignedVec::from_elem(0.0f32, n),
            biases: AlignedVec::from_elem(0.0f32, n),
        };
        let ids_ptr = in_ptr(ids, "ids")?;
        let times_ptr = out_ptr(&mut meta.times, "times")?;
        let imp_ptr = out_ptr(&mut meta.importance, "importance")?;
        let bias_ptr = out_ptr(&mut meta.biases, "biases")?;
        // SAFETY: live store; ids and the three outputs hold n aligned
        // entries each.
        check(unsafe {
            sys::mnemo_store_get_meta(self.raw(), ids_ptr, n as u64, times_ptr, imp_ptr, bias_ptr)
        })?;
        Ok(meta)
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
        let mut each = Vec::new();
        let raw_opts = opts.to_raw(nq, &mut each)?;
        let q_ptr = in_ptr(queries, "queries")?;
        let ids_ptr = out_ptr(ids, "ids")?;
        let scores_ptr = out_ptr(scores, "scores")?;
        // SAFETY: live store; queries holds nq * dim floats, ids and scores
        // nq * k entries each, filters the lengths to_raw checked; all
        // aligned; the filters (and `each`, their per-query list) outlive
        // the call.
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
