//! The numerical bounds of mnemo.h and the top-k rule, as assertions.

use mnemo::{DType, Hit, Metric, Storage};

use super::reference;

/// Contract bound for one score: EXACT cosine |err| <= 1e-5; dot of unit
/// vectors |err| <= 1e-5 (scaled by |a||b| for other norms); squared L2
/// relative err <= 1e-5.
pub fn score_tol(metric: Metric, want: f64, norm_a: f64, norm_b: f64) -> f64 {
    match metric {
        Metric::Cosine => 1e-5,
        Metric::Dot => 1e-5 * (norm_a * norm_b).max(f64::MIN_POSITIVE),
        Metric::L2Sq => 1e-5 * want.abs(),
    }
}

/// One unit in the last place of `T` at magnitude |x| (what rounding an
/// f32 result to the storage type may add).
pub fn ulp<T: Storage>(x: f64) -> f64 {
    let (mantissa_bits, min_normal_exp) = match T::DTYPE {
        DType::F16 => (10, -14),
        DType::Bf16 => (7, -126),
        _ => (23, -126),
    };
    let exp = if x == 0.0 {
        min_normal_exp
    } else {
        (x.abs().log2().floor() as i32).max(min_normal_exp)
    };
    2f64.powi(exp - mantissa_bits)
}

pub fn assert_close(what: &str, got: f64, want: f64, tol: f64) {
    let err = (got - want).abs();
    assert!(
        err <= tol,
        "{what}: got {got:e}, want {want:e}, |err| {err:e} > bound {tol:e}"
    );
}

/// Checks one row of search results against the reference ranking keys of
/// every candidate (`keys`: id -> score +/- bias, in f64) under the contract:
/// * exactly min(k, candidates) hits, distinct, all candidates;
/// * every score within `tol(id)` of its reference;
/// * sorted best first by the returned scores, equal scores by smaller id;
/// * nothing left out that is better than the last hit by more than the
///   combined error (`slack` widens this for FAST candidate search).
pub fn check_top_k(
    what: &str,
    metric: Metric,
    hits: &[Hit],
    keys: &[(u64, f64)],
    k: usize,
    tol: &dyn Fn(u64) -> f64,
    slack: f64,
) {
    assert_eq!(hits.len(), k.min(keys.len()), "{what}: number of hits");
    let key_of = |id: u64| {
        keys.iter()
            .find(|c| c.0 == id)
            .unwrap_or_else(|| panic!("{what}: id {id} is not a candidate"))
            .1
    };
    for (rank, hit) in hits.iter().enumerate() {
        assert!(!hit.score.is_nan(), "{what}: NaN score at rank {rank}");
        assert_close(
            &format!("{what}: score of id {} (rank {rank})", hit.id),
            hit.score as f64,
            key_of(hit.id),
            tol(hit.id),
        );
    }
    for pair in hits.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(a.id != b.id, "{what}: id {} returned twice", a.id);
        assert!(
            reference::before(metric, (a.id, a.score as f64), (b.id, b.score as f64)),
            "{what}: {a:?} ranked before {b:?}"
        );
    }
    let mut seen: Vec<u64> = hits.iter().map(|h| h.id).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), hits.len(), "{what}: repeated ids");
    let Some(last) = hits.last() else { return };
    let last_key = key_of(last.id);
    for &(id, key) in keys {
        if seen.binary_search(&id).is_ok() {
            continue;
        }
        let margin = tol(id) + tol(last.id) + slack;
        let better_by = if metric.higher_is_better() {
            key - last_key
        } else {
            last_key - key
        };
        assert!(
            better_by <= margin,
            "{what}: id {id} (reference {key:e}) left out, though better than the last hit \
             id {} (reference {last_key:e}) by {better_by:e} > {margin:e}",
            last.id
        );
    }
}
