//! Raw score matrices against the reference, for every metric and dtype.

use mnemo::{AlignedVec, Bf16, Metric, Storage, F16};

use crate::common::backends;
use crate::common::bounds::{assert_close, score_tol};
use crate::common::prng::Rng;
use crate::common::reference::{self, norm, to_f64};

/// (nq, n, dim): odd dims, n below a warp, one larger case.
const SHAPES: [(usize, usize, usize); 7] = [
    (1, 1, 1),
    (3, 5, 7),
    (2, 31, 33),
    (5, 64, 127),
    (17, 100, 129),
    (4, 257, 384),
    (64, 300, 769),
];

fn inputs<T: Storage>(
    rng: &mut Rng,
    metric: Metric,
    nq: usize,
    n: usize,
    dim: usize,
) -> (AlignedVec<f32>, AlignedVec<T>) {
    // Dot is bounded for unit vectors; the other metrics get raw values.
    if metric == Metric::Dot {
        (rng.unit_rows(nq, dim), rng.unit_rows(n, dim))
    } else {
        (rng.rows(nq, dim), rng.rows(n, dim))
    }
}

fn run<T: Storage>(seed: u64) {
    let backends = backends::exact();
    for (case, &(nq, n, dim)) in SHAPES.iter().enumerate() {
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
            let mut rng = Rng::new(seed * 1000 + case as u64);
            let (queries, targets) = inputs::<T>(&mut rng, metric, nq, n, dim);
            let (q64, t64) = (to_f64(&queries), to_f64(&targets));
            let want = reference::similarity(metric, &q64, &t64, dim);
            let tol = |i: usize, j: usize| {
                let (qa, tb) = (&q64[i * dim..(i + 1) * dim], &t64[j * dim..(j + 1) * dim]);
                score_tol(metric, want[i * n + j], norm(qa), norm(tb))
            };
            let mut results = Vec::new();
            for b in &backends {
                let mut got = AlignedVec::from_elem(f32::NAN, nq * n); // poisoned
                b.rt.similarity_into(metric, &queries, &targets, dim, &mut got)
                    .unwrap_or_else(|e| panic!("{}: {e}", b.name));
                for i in 0..nq {
                    for j in 0..n {
                        let what = format!(
                            "{} {metric:?} {:?} nq={nq} n={n} dim={dim} [{i},{j}]",
                            b.name,
                            T::DTYPE
                        );
                        assert_close(&what, got[i * n + j] as f64, want[i * n + j], tol(i, j));
                    }
                }
                results.push((b.name, got));
            }
            for (a, b) in results.iter().zip(results.iter().skip(1)) {
                for i in 0..nq * n {
                    let what = format!("{} vs {} {metric:?} dim={dim} [{i}]", a.0, b.0);
                    assert_close(&what, a.1[i] as f64, b.1[i] as f64, 2.0 * tol(i / n, i % n));
                }
            }
        }
    }
}

#[test]
fn similarity_f32() {
    run::<f32>(1);
}

#[test]
fn similarity_f16() {
    run::<F16>(2);
}

#[test]
fn similarity_bf16() {
    run::<Bf16>(3);
}

#[test]
fn cosine_with_a_zero_vector_is_zero() {
    let dim = 5;
    let queries: AlignedVec<f32> = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        .into_iter()
        .collect();
    for b in backends::exact() {
        let s =
            b.rt.similarity(Metric::Cosine, &queries, &queries, dim)
                .unwrap();
        assert_eq!(&s[..3], &[0.0, 0.0, 0.0], "{}", b.name);
        assert_close(b.name, s[3] as f64, 1.0, 1e-5);
    }
}

#[test]
fn empty_inputs_do_nothing() {
    let one = AlignedVec::from_slice(&[1.0f32, 2.0]);
    let none = AlignedVec::<f32>::new();
    for b in backends::exact() {
        assert!(b
            .rt
            .similarity(Metric::Dot, &none, &one, 2)
            .unwrap()
            .is_empty());
        assert!(b
            .rt
            .similarity(Metric::Dot, &one, &none, 2)
            .unwrap()
            .is_empty());
    }
}
