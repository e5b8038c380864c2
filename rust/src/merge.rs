//! The library's one top-k merge (`mnemo_topk_merge`): result lists of a
//! search over parts of the memories (shards, hosts) into one list.

use crate::aligned::{expect_len, in_ptr, out_ptr, product};
use crate::error::{check, Error, Result};
use crate::ops::Metric;
use crate::sys;

/// Merges `lists` result lists of `nq` queries, `k` places each, into one.
///
/// `ids` and `scores` hold the lists back to back (`[lists x nq x k]`, as
/// [`Store::search_into`](crate::Store::search_into) writes each one);
/// `out_ids` and `out_scores` receive `[nq x k]`: best first by `metric`
/// (higher score for cosine and dot, lower for squared L2), equal scores to
/// the smaller id, padding ([`NO_ID`](crate::NO_ID) or NaN) skipped, an id
/// found in several lists kept once at its best place, missing places padded.
/// Every buffer must be 16-byte aligned; nothing is written on error.
///
/// ```
/// use mnemo::{topk_merge, AlignedVec, Metric, NO_ID};
/// // Two lists of one query, k = 2: ids 7, 3 and ids 5, (padding).
/// let ids = AlignedVec::from_slice(&[7u64, 3, 5, NO_ID]);
/// let scores = AlignedVec::from_slice(&[0.9f32, 0.5, 0.9, f32::NAN]);
/// let mut out_ids = AlignedVec::from_elem(0u64, 2);
/// let mut out_scores = AlignedVec::from_elem(0.0f32, 2);
/// topk_merge(Metric::Dot, 2, 1, 2, &ids, &scores, &mut out_ids, &mut out_scores)?;
/// assert_eq!(&out_ids[..], &[5, 7]); // equal scores: the smaller id first
/// # Ok::<(), mnemo::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn topk_merge(
    metric: Metric,
    lists: usize,
    nq: usize,
    k: usize,
    ids: &[u64],
    scores: &[f32],
    out_ids: &mut [u64],
    out_scores: &mut [f32],
) -> Result<()> {
    if k == 0 {
        return Err(Error::invalid("k must be at least 1"));
    }
    let out_n = product(nq, k, "results (nq * k)")?;
    let in_n = product(out_n, lists, "inputs (lists * nq * k)")?;
    expect_len(ids.len(), in_n, "ids")?;
    expect_len(scores.len(), in_n, "scores")?;
    expect_len(out_ids.len(), out_n, "out_ids")?;
    expect_len(out_scores.len(), out_n, "out_scores")?;
    let ids_ptr = in_ptr(ids, "ids")?;
    let scores_ptr = in_ptr(scores, "scores")?;
    let out_ids_ptr = out_ptr(out_ids, "out_ids")?;
    let out_scores_ptr = out_ptr(out_scores, "out_scores")?;
    // SAFETY: the inputs hold lists * nq * k entries and the outputs nq * k
    // (checked above), all aligned; the outputs are exclusive borrows, so
    // they overlap nothing.
    check(unsafe {
        sys::mnemo_topk_merge(
            metric.code(),
            lists as u64,
            nq as u64,
            k as u64,
            ids_ptr,
            scores_ptr,
            out_ids_ptr,
            out_scores_ptr,
        )
    })
}
