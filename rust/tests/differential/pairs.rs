//! Pair scoring against the reference: every metric, dtype and index type,
//! repeated pairs and src = tgt included.

use mnemo::{AlignedVec, Bf16, Index, Metric, Storage, F16};

use crate::common::backends;
use crate::common::bounds::{assert_close, score_tol};
use crate::common::prng::Rng;
use crate::common::reference::{norm, score, to_f64};

/// (n_items, dim, n_pairs)
const SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (7, 3, 37),
    (31, 33, 100),
    (200, 129, 1000),
    (2000, 384, 5000),
];

fn run<T: Storage, I: Index>(seed: u64, to_index: fn(u64) -> I) {
    let backends = backends::exact();
    for (case, &(n_items, dim, n_pairs)) in SHAPES.iter().enumerate() {
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
            let mut rng = Rng::new(seed * 1000 + case as u64);
            let table: AlignedVec<T> = if metric == Metric::Dot {
                rng.unit_rows(n_items, dim)
            } else {
                rng.rows(n_items, dim)
            };
            let mut src_u: Vec<u64> = (0..n_pairs).map(|_| rng.below(n_items as u64)).collect();
            let mut tgt_u: Vec<u64> = (0..n_pairs).map(|_| rng.below(n_items as u64)).collect();
            // Some self pairs, and repeats of the first pair.
            for p in (0..n_pairs).step_by(7) {
                src_u[p] = tgt_u[p];
            }
            for p in (3..n_pairs).step_by(11) {
                (src_u[p], tgt_u[p]) = (src_u[0], tgt_u[0]);
            }
            let src: AlignedVec<I> = src_u.iter().map(|&i| to_index(i)).collect();
            let tgt: AlignedVec<I> = tgt_u.iter().map(|&i| to_index(i)).collect();
            let t64 = to_f64(&table);
            let row = |i: u64| &t64[i as usize * dim..(i as usize + 1) * dim];
            let want: Vec<f64> = (0..n_pairs)
                .map(|p| score(metric, row(src_u[p]), row(tgt_u[p])))
                .collect();
            let tol =
                |p: usize| score_tol(metric, want[p], norm(row(src_u[p])), norm(row(tgt_u[p])));
            let mut results = Vec::new();
            for b in &backends {
                let mut got = AlignedVec::from_elem(f32::NAN, n_pairs);
                b.rt.score_pairs_into(metric, &table, dim, &src, &tgt, &mut got)
                    .unwrap_or_else(|e| panic!("{}: {e}", b.name));
                for p in 0..n_pairs {
                    let what = format!(
                        "{} {metric:?} {:?}/{:?} items={n_items} dim={dim} pair {p}",
                        b.name,
                        T::DTYPE,
                        I::DTYPE
                    );
                    assert_close(&what, got[p] as f64, want[p], tol(p));
                }
                results.push((b.name, got));
            }
            for (a, b) in results.iter().zip(results.iter().skip(1)) {
                for p in 0..n_pairs {
                    let what = format!("{} vs {} {metric:?} pair {p}", a.0, b.0);
                    assert_close(&what, a.1[p] as f64, b.1[p] as f64, 2.0 * tol(p));
                }
            }
        }
    }
}

#[test]
fn pairs_f32_u32() {
    run::<f32, u32>(11, |i| i as u32);
}

#[test]
fn pairs_f32_u64() {
    run::<f32, u64>(12, |i| i);
}

#[test]
fn pairs_f16_u64() {
    run::<F16, u64>(13, |i| i);
}

#[test]
fn pairs_bf16_u32() {
    run::<Bf16, u32>(14, |i| i as u32);
}

#[test]
fn no_pairs_do_nothing() {
    let table = AlignedVec::from_slice(&[1.0f32, 2.0]);
    let none = AlignedVec::<u32>::new();
    for b in backends::exact() {
        let s =
            b.rt.score_pairs(Metric::Dot, &table, 2, &none, &none)
                .unwrap();
        assert!(s.is_empty(), "{}", b.name);
    }
}
