//! Row L2 normalisation and LayerNorm against the reference, out of place
//! and in place, for every dtype.

use mnemo::{AlignedVec, Bf16, LayerNormParams, Storage, F16};

use crate::common::backends;
use crate::common::bounds::{assert_close, ulp};
use crate::common::prng::Rng;
use crate::common::reference::{self, to_f64};

/// (rows, dim)
const SHAPES: [(usize, usize); 6] = [(1, 1), (3, 7), (5, 33), (40, 129), (9, 384), (300, 769)];

fn normalize<T: Storage>(seed: u64) {
    let backends = backends::exact();
    for (c, &(rows, dim)) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(seed * 100 + c as u64);
        let mut data: AlignedVec<T> = rng.rows(rows, dim);
        // A zero row stays zero.
        if rows > 2 {
            data[dim..2 * dim].fill(T::from_f32_rounded(0.0));
        }
        let want = reference::normalize_rows(&to_f64(&data), dim);
        // Unit-vector components: the dot-product bound, plus rounding to T.
        let tol = |w: f64| 1e-5 + ulp::<T>(w);
        let mut results = Vec::new();
        for u in &backends {
            let mut out = AlignedVec::from_elem(T::from_f32_rounded(f32::NAN), data.len());
            u.rt.normalize_rows_into(&data, &mut out, dim)
                .unwrap_or_else(|e| panic!("{}: {e}", u.name));
            for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
                let what = format!(
                    "{} normalize {:?} rows={rows} dim={dim} [{i}]",
                    u.name,
                    T::DTYPE
                );
                assert_close(&what, g.to_f32_exact() as f64, w, tol(w));
            }
            let mut in_place = data.clone();
            u.rt.normalize_rows_in_place(&mut in_place, dim).unwrap();
            assert_eq!(in_place, out, "{}: in place differs", u.name);
            results.push((u.name, out));
        }
        for (a, b) in results.iter().zip(results.iter().skip(1)) {
            for (i, w) in want.iter().enumerate() {
                let what = format!("{} vs {} normalize [{i}]", a.0, b.0);
                assert_close(
                    &what,
                    a.1[i].to_f32_exact() as f64,
                    b.1[i].to_f32_exact() as f64,
                    2.0 * tol(*w),
                );
            }
        }
    }
}

fn layer_norm<T: Storage>(seed: u64) {
    let backends = backends::exact();
    for (c, &(rows, dim)) in SHAPES.iter().enumerate() {
        for (variant, eps) in [0.0f32, 1e-5, 0.1].into_iter().enumerate() {
            let mut rng = Rng::new(seed * 100 + c as u64 * 10 + variant as u64);
            // Rows with an offset, so the mean matters.
            let mut raw = rng.values(rows * dim);
            for (r, row) in raw.chunks_mut(dim).enumerate() {
                let offset = (r % 5) as f32 - 2.0;
                row.iter_mut().for_each(|v| *v += offset);
            }
            let data: AlignedVec<T> = raw.iter().map(|&v| T::from_f32_rounded(v)).collect();
            let gamma: AlignedVec<f32> = (0..dim).map(|_| rng.range(0.5, 1.5) as f32).collect();
            let beta: AlignedVec<f32> = (0..dim).map(|_| rng.range(-0.5, 0.5) as f32).collect();
            let use_params = variant != 1;
            let g64: Vec<f64> = gamma.iter().map(|&v| v as f64).collect();
            let b64: Vec<f64> = beta.iter().map(|&v| v as f64).collect();
            let want = reference::layer_norm(
                &to_f64(&data),
                dim,
                use_params.then_some(&g64[..]),
                use_params.then_some(&b64[..]),
                eps as f64,
            );
            let params = LayerNormParams {
                gamma: use_params.then_some(&gamma[..]),
                beta: use_params.then_some(&beta[..]),
                eps,
            };
            // Not in the contract: f32 statistics give about 1e-6 relative
            // error on normalised values of order 1, so 1e-5 is generous.
            let tol = |w: f64| 1e-5 * (1.0 + w.abs()) + ulp::<T>(w);
            let mut results = Vec::new();
            for u in &backends {
                let mut out = AlignedVec::from_elem(T::from_f32_rounded(f32::NAN), data.len());
                u.rt.layer_norm_into(&data, &mut out, dim, &params)
                    .unwrap_or_else(|e| panic!("{}: {e}", u.name));
                // dim = 1 rows are constant: with eps = 0 they become beta,
                // which the reference gives too.
                for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
                    let what = format!(
                        "{} layer_norm {:?} rows={rows} dim={dim} eps={eps} params={use_params} [{i}]",
                        u.name,
                        T::DTYPE
                    );
                    assert_close(&what, g.to_f32_exact() as f64, w, tol(w));
                }
                let mut in_place = data.clone();
                u.rt.layer_norm_in_place(&mut in_place, dim, &params)
                    .unwrap();
                assert_eq!(in_place, out, "{}: in place differs", u.name);
                results.push((u.name, out));
            }
            for (a, b) in results.iter().zip(results.iter().skip(1)) {
                for (i, w) in want.iter().enumerate() {
                    let what = format!("{} vs {} layer_norm [{i}]", a.0, b.0);
                    assert_close(
                        &what,
                        a.1[i].to_f32_exact() as f64,
                        b.1[i].to_f32_exact() as f64,
                        2.0 * tol(*w),
                    );
                }
            }
        }
    }
}

#[test]
fn normalize_f32() {
    normalize::<f32>(41);
}

#[test]
fn normalize_f16() {
    normalize::<F16>(42);
}

#[test]
fn normalize_bf16() {
    normalize::<Bf16>(43);
}

#[test]
fn layer_norm_f32() {
    layer_norm::<f32>(44);
}

#[test]
fn layer_norm_f16() {
    layer_norm::<F16>(45);
}

#[test]
fn layer_norm_bf16() {
    layer_norm::<Bf16>(46);
}

#[test]
fn constant_row_with_zero_eps_becomes_beta() {
    let dim = 4;
    let data = AlignedVec::from_slice(&[3.0f32; 8]);
    let beta = AlignedVec::from_slice(&[0.5f32, -1.0, 2.0, 0.0]);
    let gamma = AlignedVec::from_slice(&[9.0f32; 4]);
    let params = LayerNormParams {
        gamma: Some(&gamma),
        beta: Some(&beta),
        eps: 0.0,
    };
    for u in backends::exact() {
        let out = u.rt.layer_norm(&data, dim, &params).unwrap();
        assert_eq!(&out[..4], &beta[..], "{}", u.name);
        assert_eq!(&out[4..], &beta[..], "{}", u.name);
    }
}
