//! The store-less operations: similarity matrices, pair scoring, trajectory
//! resampling and row normalisation, as methods of [`Runtime`].

use crate::aligned::{expect_len, in_ptr, out_ptr, product, rows_of, AlignedVec};
use crate::dtype::{Index, Storage, Time};
use crate::error::{check, Error, Result};
use crate::runtime::Runtime;
use crate::sys;

/// Similarity metric (`enum mnemo_metric`). Cosine and dot are similarities
/// (higher is better); squared L2 is a distance (lower is better).
///
/// ```
/// assert!(mnemo::Metric::Cosine.higher_is_better());
/// assert!(!mnemo::Metric::L2Sq.higher_is_better());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Cosine similarity; 0 when either vector has zero norm.
    Cosine,
    /// Dot product.
    Dot,
    /// Squared Euclidean distance.
    L2Sq,
}

impl Metric {
    pub(crate) fn code(self) -> i32 {
        (match self {
            Metric::Cosine => sys::MNEMO_METRIC_COSINE,
            Metric::Dot => sys::MNEMO_METRIC_DOT,
            Metric::L2Sq => sys::MNEMO_METRIC_L2SQ,
        }) as i32
    }

    pub(crate) fn from_code(code: i32) -> Option<Metric> {
        [Metric::Cosine, Metric::Dot, Metric::L2Sq]
            .into_iter()
            .find(|m| m.code() == code)
    }

    /// Whether larger scores are better matches (cosine, dot).
    ///
    /// ```
    /// assert!(mnemo::Metric::Dot.higher_is_better());
    /// ```
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Metric::L2Sq)
    }
}

/// Shape of a resampling: `batch` rows of `n_src` samples of `dim` values
/// each, resampled at `n_tgt` target times per row.
///
/// ```
/// let shape = mnemo::ResampleShape { batch: 2, n_src: 10, n_tgt: 5, dim: 3 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResampleShape {
    /// Number of trajectories.
    pub batch: usize,
    /// Samples (and source times) per trajectory.
    pub n_src: usize,
    /// Target times (and output samples) per trajectory.
    pub n_tgt: usize,
    /// Values per sample.
    pub dim: usize,
}

/// Optional per-row valid lengths of a resampling; each given slice has
/// `batch` entries.
///
/// ```
/// let src = mnemo::AlignedVec::from_slice(&[3u64, 5]);
/// let lengths = mnemo::ResampleLengths { src: Some(&src), tgt: None };
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ResampleLengths<'a> {
    /// Row b uses only its first `src[b]` samples and times (1..=n_src).
    pub src: Option<&'a [u64]>,
    /// Row b reads only its first `tgt[b]` target times (0..=n_tgt); later
    /// output samples are set to zero.
    pub tgt: Option<&'a [u64]>,
}

/// Parameters of [`Runtime::layer_norm`].
///
/// ```
/// let p = mnemo::LayerNormParams::default();
/// assert_eq!(p.eps, 1e-5);
/// assert!(p.gamma.is_none() && p.beta.is_none());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LayerNormParams<'a> {
    /// Scale per column (`dim` values); `None` means ones.
    pub gamma: Option<&'a [f32]>,
    /// Shift per column (`dim` values); `None` means zeros.
    pub beta: Option<&'a [f32]>,
    /// Added to the variance; finite and >= 0.
    pub eps: f32,
}

impl Default for LayerNormParams<'_> {
    fn default() -> Self {
        LayerNormParams {
            gamma: None,
            beta: None,
            eps: 1e-5,
        }
    }
}

fn zero<T: Storage>() -> T {
    T::from_f32_rounded(0.0)
}

impl Runtime {
    /// The score matrix `[nq x n]` of every query (f32 `[nq x dim]`) against
    /// every target (`[n x dim]` of f32, F16 or Bf16).
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let q = AlignedVec::from_slice(&[1.0f32, 0.0]);
    /// let t = AlignedVec::from_slice(&[1.0f32, 0.0, 0.0, 2.0, 3.0, 4.0]);
    /// let s = rt.similarity(Metric::Dot, &q, &t, 2)?;
    /// assert_eq!(&s[..], &[1.0, 0.0, 3.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn similarity<T: Storage>(
        &self,
        metric: Metric,
        queries: &[f32],
        targets: &[T],
        dim: usize,
    ) -> Result<AlignedVec<f32>> {
        let nq = rows_of(queries.len(), dim, "queries")?;
        let n = rows_of(targets.len(), dim, "targets")?;
        let mut scores = AlignedVec::from_elem(0.0f32, product(nq, n, "scores")?);
        self.similarity_into(metric, queries, targets, dim, &mut scores)?;
        Ok(scores)
    }

    /// Like [`Runtime::similarity`], into a caller buffer of `nq * n` floats;
    /// nothing is written on error.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let v = AlignedVec::from_slice(&[3.0f32, 4.0]);
    /// let mut out = AlignedVec::from_elem(0.0f32, 1);
    /// rt.similarity_into(Metric::L2Sq, &v, &v, 2, &mut out)?;
    /// assert_eq!(out[0], 0.0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn similarity_into<T: Storage>(
        &self,
        metric: Metric,
        queries: &[f32],
        targets: &[T],
        dim: usize,
        scores: &mut [f32],
    ) -> Result<()> {
        let nq = rows_of(queries.len(), dim, "queries")?;
        let n = rows_of(targets.len(), dim, "targets")?;
        expect_len(scores.len(), product(nq, n, "scores")?, "scores")?;
        let q_ptr = in_ptr(queries, "queries")?;
        let t_ptr = in_ptr(targets, "targets")?;
        let s_ptr = out_ptr(scores, "scores")?;
        // SAFETY: live runtime; every buffer is aligned and holds exactly the
        // element counts the shapes imply (checked above).
        check(unsafe {
            sys::mnemo_similarity(
                self.ptr(),
                metric.code(),
                q_ptr,
                nq as u64,
                t_ptr.cast(),
                T::DTYPE.code(),
                n as u64,
                dim as u64,
                s_ptr,
            )
        })
    }

    /// One score per (src, tgt) pair, in input order:
    /// `metric(table[src[p]], table[tgt[p]])`, with `table` `[n_items x dim]`.
    /// An index `>= n_items` fails with [`Status::OutOfRange`](crate::Status)
    /// naming the pair.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let table = AlignedVec::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]);
    /// let src = AlignedVec::from_slice(&[0u32, 2]);
    /// let tgt = AlignedVec::from_slice(&[1u32, 2]);
    /// let s = rt.score_pairs(Metric::Dot, &table, 2, &src, &tgt)?;
    /// assert_eq!(&s[..], &[0.0, 2.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn score_pairs<T: Storage, I: Index>(
        &self,
        metric: Metric,
        table: &[T],
        dim: usize,
        src: &[I],
        tgt: &[I],
    ) -> Result<AlignedVec<f32>> {
        let mut scores = AlignedVec::from_elem(0.0f32, src.len());
        self.score_pairs_into(metric, table, dim, src, tgt, &mut scores)?;
        Ok(scores)
    }

    /// Like [`Runtime::score_pairs`], into a caller buffer of `src.len()`
    /// floats; nothing is written on error.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Metric, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let table = AlignedVec::from_slice(&[1.0f32, 2.0]);
    /// let idx = AlignedVec::from_slice(&[0u64, 1]);
    /// let mut out = AlignedVec::from_elem(0.0f32, 2);
    /// rt.score_pairs_into(Metric::L2Sq, &table, 1, &idx, &idx, &mut out)?;
    /// assert_eq!(&out[..], &[0.0, 0.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn score_pairs_into<T: Storage, I: Index>(
        &self,
        metric: Metric,
        table: &[T],
        dim: usize,
        src: &[I],
        tgt: &[I],
        scores: &mut [f32],
    ) -> Result<()> {
        let n_items = rows_of(table.len(), dim, "table")?;
        expect_len(tgt.len(), src.len(), "tgt")?;
        expect_len(scores.len(), src.len(), "scores")?;
        let table_ptr = in_ptr(table, "table")?;
        let src_ptr = in_ptr(src, "src")?;
        let tgt_ptr = in_ptr(tgt, "tgt")?;
        let s_ptr = out_ptr(scores, "scores")?;
        // SAFETY: live runtime; table holds n_items * dim elements, src, tgt
        // and scores n_pairs entries each, all aligned (checked above); the
        // library checks every index against n_items before reading.
        check(unsafe {
            sys::mnemo_score_pairs(
                self.ptr(),
                metric.code(),
                table_ptr.cast(),
                T::DTYPE.code(),
                n_items as u64,
                dim as u64,
                src_ptr.cast(),
                tgt_ptr.cast(),
                I::DTYPE.code(),
                src.len() as u64,
                s_ptr,
            )
        })
    }

    /// Linear interpolation of trajectories at new times.
    ///
    /// `data` is `[batch x n_src x dim]`, `src_times` `[batch x n_src]`
    /// (non-decreasing per row), `tgt_times` `[batch x n_tgt]` (any order);
    /// the result is `[batch x n_tgt x dim]`. Targets outside a row's time
    /// range take its end samples.
    ///
    /// ```
    /// use mnemo::{AlignedVec, ResampleLengths, ResampleShape, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let data = AlignedVec::from_slice(&[0.0f32, 10.0, 20.0]);
    /// let src_t = AlignedVec::from_slice(&[0.0f64, 1.0, 2.0]);
    /// let tgt_t = AlignedVec::from_slice(&[0.5f64, 1.75, 9.0]);
    /// let shape = ResampleShape { batch: 1, n_src: 3, n_tgt: 3, dim: 1 };
    /// let out = rt.resample(shape, &data, &src_t, &tgt_t, &ResampleLengths::default())?;
    /// assert_eq!(&out[..], &[5.0, 17.5, 20.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn resample<T: Storage, S: Time>(
        &self,
        shape: ResampleShape,
        data: &[T],
        src_times: &[S],
        tgt_times: &[S],
        lengths: &ResampleLengths<'_>,
    ) -> Result<AlignedVec<T>> {
        let total = product(product(shape.batch, shape.n_tgt, "out")?, shape.dim, "out")?;
        let mut out = AlignedVec::from_elem(zero::<T>(), total);
        self.resample_into(shape, data, src_times, tgt_times, lengths, &mut out)?;
        Ok(out)
    }

    /// Like [`Runtime::resample`], into a caller buffer of
    /// `batch * n_tgt * dim` elements; nothing is written on error.
    ///
    /// ```
    /// use mnemo::{AlignedVec, ResampleLengths, ResampleShape, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let data = AlignedVec::from_slice(&[1.0f32, 3.0]);
    /// let t = AlignedVec::from_slice(&[0.0f32, 2.0]);
    /// let at = AlignedVec::from_slice(&[1.0f32]);
    /// let mut out = AlignedVec::from_elem(0.0f32, 1);
    /// let shape = ResampleShape { batch: 1, n_src: 2, n_tgt: 1, dim: 1 };
    /// rt.resample_into(shape, &data, &t, &at, &ResampleLengths::default(), &mut out)?;
    /// assert_eq!(out[0], 2.0);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn resample_into<T: Storage, S: Time>(
        &self,
        shape: ResampleShape,
        data: &[T],
        src_times: &[S],
        tgt_times: &[S],
        lengths: &ResampleLengths<'_>,
        out: &mut [T],
    ) -> Result<()> {
        let ResampleShape {
            batch,
            n_src,
            n_tgt,
            dim,
        } = shape;
        let src_n = product(batch, n_src, "src_times")?;
        let tgt_n = product(batch, n_tgt, "tgt_times")?;
        expect_len(data.len(), product(src_n, dim, "data")?, "data")?;
        expect_len(src_times.len(), src_n, "src_times")?;
        expect_len(tgt_times.len(), tgt_n, "tgt_times")?;
        expect_len(out.len(), product(tgt_n, dim, "out")?, "out")?;

        // SAFETY: plain function returning a struct by value.
        let mut opts = unsafe { sys::mnemo_resample_options_default() };
        if let Some(src_len) = lengths.src {
            expect_len(src_len.len(), batch, "src lengths")?;
            opts.src_lengths = in_ptr(src_len, "src lengths")?;
        }
        if let Some(tgt_len) = lengths.tgt {
            expect_len(tgt_len.len(), batch, "tgt lengths")?;
            opts.tgt_lengths = in_ptr(tgt_len, "tgt lengths")?;
        }
        let data_ptr = in_ptr(data, "data")?;
        let src_ptr = in_ptr(src_times, "src_times")?;
        let tgt_ptr = in_ptr(tgt_times, "tgt_times")?;
        let out_ptr = out_ptr(out, "out")?;
        // SAFETY: live runtime; every buffer is aligned and has exactly the
        // length the shape implies (checked above); `out` is a distinct
        // mutable borrow, so it cannot overlap the inputs.
        check(unsafe {
            sys::mnemo_resample(
                self.ptr(),
                data_ptr.cast(),
                T::DTYPE.code(),
                batch as u64,
                n_src as u64,
                dim as u64,
                src_ptr.cast(),
                tgt_ptr.cast(),
                S::DTYPE.code(),
                n_tgt as u64,
                &opts,
                out_ptr.cast(),
            )
        })
    }

    /// Each row of `data` (`[rows x dim]`) divided by its L2 norm; a zero row
    /// stays zero.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let out = rt.normalize_rows(&AlignedVec::from_slice(&[3.0f32, 4.0, 0.0, 0.0]), 2)?;
    /// assert!((out[0] - 0.6).abs() < 1e-6 && (out[1] - 0.8).abs() < 1e-6);
    /// assert_eq!(&out[2..], &[0.0, 0.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn normalize_rows<T: Storage>(&self, data: &[T], dim: usize) -> Result<AlignedVec<T>> {
        let mut out = AlignedVec::from_elem(zero::<T>(), data.len());
        self.normalize_rows_into(data, &mut out, dim)?;
        Ok(out)
    }

    /// Like [`Runtime::normalize_rows`], into a caller buffer of the same
    /// length; nothing is written on error.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let input = AlignedVec::from_slice(&[0.0f32, 2.0]);
    /// let mut out = AlignedVec::from_elem(0.0f32, 2);
    /// rt.normalize_rows_into(&input, &mut out, 2)?;
    /// assert_eq!(&out[..], &[0.0, 1.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn normalize_rows_into<T: Storage>(
        &self,
        input: &[T],
        out: &mut [T],
        dim: usize,
    ) -> Result<()> {
        let rows = rows_of(input.len(), dim, "in")?;
        expect_len(out.len(), input.len(), "out")?;
        let in_ptr = in_ptr(input, "in")?;
        let out_ptr = out_ptr(out, "out")?;
        self.normalize_raw(in_ptr, out_ptr, rows, dim)
    }

    /// Normalises each row of `data` in place.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let mut data = AlignedVec::from_slice(&[0.0f32, -5.0]);
    /// rt.normalize_rows_in_place(&mut data, 2)?;
    /// assert_eq!(&data[..], &[0.0, -1.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn normalize_rows_in_place<T: Storage>(&self, data: &mut [T], dim: usize) -> Result<()> {
        let rows = rows_of(data.len(), dim, "data")?;
        let ptr = out_ptr(data, "data")?;
        self.normalize_raw(ptr, ptr, rows, dim)
    }

    fn normalize_raw<T: Storage>(
        &self,
        input: *const T,
        out: *mut T,
        rows: usize,
        dim: usize,
    ) -> Result<()> {
        // SAFETY: callers pass aligned pointers to rows * dim elements; the
        // two are either distinct borrows or the same one (in place, which
        // the header allows).
        check(unsafe {
            sys::mnemo_normalize_rows(
                self.ptr(),
                input.cast(),
                out.cast(),
                T::DTYPE.code(),
                rows as u64,
                dim as u64,
            )
        })
    }

    /// LayerNorm over each row of `data` (`[rows x dim]`):
    /// `(x - mean) / sqrt(var + eps) * gamma + beta`, biased variance.
    ///
    /// ```
    /// use mnemo::{AlignedVec, LayerNormParams, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let x = AlignedVec::from_slice(&[1.0f32, 3.0]);
    /// let p = LayerNormParams { eps: 0.0, ..Default::default() };
    /// let out = rt.layer_norm(&x, 2, &p)?;
    /// assert_eq!(&out[..], &[-1.0, 1.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn layer_norm<T: Storage>(
        &self,
        data: &[T],
        dim: usize,
        params: &LayerNormParams<'_>,
    ) -> Result<AlignedVec<T>> {
        let mut out = AlignedVec::from_elem(zero::<T>(), data.len());
        self.layer_norm_into(data, &mut out, dim, params)?;
        Ok(out)
    }

    /// Like [`Runtime::layer_norm`], into a caller buffer of the same length;
    /// nothing is written on error.
    ///
    /// ```
    /// use mnemo::{AlignedVec, LayerNormParams, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let x = AlignedVec::from_slice(&[2.0f32, 2.0]);
    /// let beta = AlignedVec::from_slice(&[0.5f32, -0.5]);
    /// let p = LayerNormParams { beta: Some(&beta), eps: 0.0, ..Default::default() };
    /// let mut out = AlignedVec::from_elem(0.0f32, 2);
    /// rt.layer_norm_into(&x, &mut out, 2, &p)?; // a constant row becomes beta
    /// assert_eq!(&out[..], &[0.5, -0.5]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn layer_norm_into<T: Storage>(
        &self,
        input: &[T],
        out: &mut [T],
        dim: usize,
        params: &LayerNormParams<'_>,
    ) -> Result<()> {
        let rows = rows_of(input.len(), dim, "in")?;
        expect_len(out.len(), input.len(), "out")?;
        let in_ptr = in_ptr(input, "in")?;
        let out_ptr = out_ptr(out, "out")?;
        self.layer_norm_raw(in_ptr, out_ptr, rows, dim, params)
    }

    /// LayerNorm of each row of `data`, in place.
    ///
    /// ```
    /// use mnemo::{AlignedVec, LayerNormParams, Runtime};
    /// let rt = Runtime::builder().cpu().build()?;
    /// let mut x = AlignedVec::from_slice(&[5.0f32, 7.0]);
    /// let gamma = AlignedVec::from_slice(&[2.0f32, 2.0]);
    /// let p = LayerNormParams { gamma: Some(&gamma), eps: 0.0, ..Default::default() };
    /// rt.layer_norm_in_place(&mut x, 2, &p)?;
    /// assert_eq!(&x[..], &[-2.0, 2.0]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn layer_norm_in_place<T: Storage>(
        &self,
        data: &mut [T],
        dim: usize,
        params: &LayerNormParams<'_>,
    ) -> Result<()> {
        let rows = rows_of(data.len(), dim, "data")?;
        let ptr = out_ptr(data, "data")?;
        self.layer_norm_raw(ptr, ptr, rows, dim, params)
    }

    fn layer_norm_raw<T: Storage>(
        &self,
        input: *const T,
        out: *mut T,
        rows: usize,
        dim: usize,
        params: &LayerNormParams<'_>,
    ) -> Result<()> {
        let gamma = column_params(params.gamma, dim, "gamma")?;
        let beta = column_params(params.beta, dim, "beta")?;
        // SAFETY: callers pass aligned pointers to rows * dim elements (or
        // the same pointer twice, in place); gamma and beta are NULL or
        // aligned with dim floats.
        check(unsafe {
            sys::mnemo_layer_norm(
                self.ptr(),
                input.cast(),
                out.cast(),
                T::DTYPE.code(),
                rows as u64,
                dim as u64,
                gamma,
                beta,
                params.eps,
            )
        })
    }
}

/// NULL for `None`, else the checked pointer of a `dim`-long column vector.
fn column_params(values: Option<&[f32]>, dim: usize, what: &str) -> Result<*const f32> {
    match values {
        None => Ok(std::ptr::null()),
        Some(v) => {
            if v.len() != dim {
                return Err(Error::shape(format!(
                    "{what}: has {} values, dim is {dim}",
                    v.len()
                )));
            }
            in_ptr(v, what)
        }
    }
}
