//! Trajectory resampling against the reference: every data and time dtype,
//! optional lengths, and the exact rules of mnemo.h (end samples, equal
//! times, n_src = 1, targets in any order).

use mnemo::{AlignedVec, Bf16, ResampleLengths, ResampleShape, Storage, Time, F16};

use crate::common::backends;
use crate::common::bounds::{assert_close, ulp};
use crate::common::prng::Rng;
use crate::common::reference::{self, to_f64};

/// Converts test times (exact in f32 by construction) to the time type.
trait TestTime: Time {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl TestTime for f32 {
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl TestTime for f64 {
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// Non-decreasing times with some equal neighbours, starting anywhere.
fn source_times(rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut t = rng.range(-50.0, 50.0) as f32 as f64;
    (0..n)
        .map(|_| {
            if rng.below(6) != 0 {
                t = (t + rng.range(0.01, 2.0)) as f32 as f64;
            }
            t
        })
        .collect()
}

/// Targets in random order: inside the range, exactly on source times, and
/// before and after it.
fn target_times(rng: &mut Rng, src: &[f64], n: usize) -> Vec<f64> {
    let (lo, hi) = (src[0], src[src.len() - 1]);
    (0..n)
        .map(|_| match rng.below(5) {
            0 => src[rng.below(src.len() as u64) as usize],
            1 => lo - rng.range(0.0, 5.0) as f32 as f64,
            2 => hi + rng.range(0.0, 5.0) as f32 as f64,
            _ => rng.range(lo, hi) as f32 as f64,
        })
        .collect()
}

struct Case {
    batch: usize,
    n_src: usize,
    n_tgt: usize,
    dim: usize,
    lengths: bool,
}

const CASES: [Case; 6] = [
    Case {
        batch: 1,
        n_src: 1,
        n_tgt: 3,
        dim: 1,
        lengths: false,
    },
    Case {
        batch: 2,
        n_src: 2,
        n_tgt: 5,
        dim: 3,
        lengths: false,
    },
    Case {
        batch: 3,
        n_src: 17,
        n_tgt: 9,
        dim: 7,
        lengths: true,
    },
    Case {
        batch: 5,
        n_src: 64,
        n_tgt: 33,
        dim: 64,
        lengths: false,
    },
    Case {
        batch: 4,
        n_src: 100,
        n_tgt: 50,
        dim: 17,
        lengths: true,
    },
    Case {
        batch: 64,
        n_src: 512,
        n_tgt: 256,
        dim: 16,
        lengths: false,
    },
];

fn run<T: Storage, S: TestTime>(seed: u64) {
    let backends = backends::exact();
    for (c, case) in CASES.iter().enumerate() {
        let Case {
            batch,
            n_src,
            n_tgt,
            dim,
            lengths,
        } = *case;
        let mut rng = Rng::new(seed * 100 + c as u64);
        let data: AlignedVec<T> = rng.rows(batch * n_src, dim);
        let src_len: AlignedVec<u64> = (0..batch)
            .map(|_| {
                if lengths {
                    1 + rng.below(n_src as u64)
                } else {
                    n_src as u64
                }
            })
            .collect();
        let tgt_len: AlignedVec<u64> = (0..batch)
            .map(|_| {
                if lengths {
                    rng.below(n_tgt as u64 + 1)
                } else {
                    n_tgt as u64
                }
            })
            .collect();
        let mut src_t = Vec::new();
        let mut tgt_t = Vec::new();
        for b in 0..batch {
            let mut row = source_times(&mut rng, src_len[b] as usize);
            let targets = target_times(&mut rng, &row, n_tgt);
            // Samples past the valid length are never read: make them wild.
            row.resize(n_src, -1e30);
            src_t.extend(row);
            tgt_t.extend(targets);
        }
        let src_times: AlignedVec<S> = src_t.iter().map(|&t| S::from_f64(t)).collect();
        let tgt_times: AlignedVec<S> = tgt_t.iter().map(|&t| S::from_f64(t)).collect();

        let d64 = to_f64(&data);
        let mut want = vec![0.0f64; batch * n_tgt * dim];
        let mut scale = vec![0.0f64; batch * n_tgt * dim];
        for b in 0..batch {
            let s = src_len[b] as usize;
            let samples = &d64[b * n_src * dim..(b * n_src + s) * dim];
            let times: Vec<f64> = src_times[b * n_src..b * n_src + s]
                .iter()
                .map(|t| t.to_f64())
                .collect();
            let row_max = samples.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for t in 0..tgt_len[b] as usize {
                let at = tgt_times[b * n_tgt + t].to_f64();
                let out = reference::resample_row(samples, &times, dim, at);
                let at_out = (b * n_tgt + t) * dim;
                want[at_out..at_out + dim].copy_from_slice(&out);
                scale[at_out..at_out + dim].fill(row_max);
            }
        }
        let shape = ResampleShape {
            batch,
            n_src,
            n_tgt,
            dim,
        };
        let lens = ResampleLengths {
            src: lengths.then_some(&src_len[..]),
            tgt: lengths.then_some(&tgt_len[..]),
        };
        // fma in f32 of values up to `scale`, plus rounding to T.
        let tol = |i: usize| 4.0 * f32::EPSILON as f64 * scale[i] + ulp::<T>(want[i]);
        let mut results = Vec::new();
        for u in &backends {
            let poison = T::from_f32_rounded(f32::NAN);
            let mut out = AlignedVec::from_elem(poison, batch * n_tgt * dim);
            u.rt.resample_into(shape, &data, &src_times, &tgt_times, &lens, &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", u.name));
            for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
                let what = format!(
                    "{} {:?}/{:?} case {c} out[b={}, t={}, d={}]",
                    u.name,
                    T::DTYPE,
                    S::DTYPE,
                    i / (n_tgt * dim),
                    i / dim % n_tgt,
                    i % dim
                );
                assert_close(&what, g.to_f32_exact() as f64, w, tol(i));
            }
            results.push((u.name, out));
        }
        for (a, b) in results.iter().zip(results.iter().skip(1)) {
            for i in 0..want.len() {
                let what = format!("{} vs {} case {c} [{i}]", a.0, b.0);
                assert_close(
                    &what,
                    a.1[i].to_f32_exact() as f64,
                    b.1[i].to_f32_exact() as f64,
                    2.0 * tol(i),
                );
            }
        }
    }
}

#[test]
fn resample_f32_f32() {
    run::<f32, f32>(31);
}

#[test]
fn resample_f32_f64() {
    run::<f32, f64>(32);
}

#[test]
fn resample_f16_f32() {
    run::<F16, f32>(33);
}

#[test]
fn resample_bf16_f64() {
    run::<Bf16, f64>(34);
}

/// The rules that must hold exactly, not just within a bound.
#[test]
fn resample_exact_rules() {
    let dim = 3;
    let data: AlignedVec<Bf16> = [
        1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0, -1.5, 7.0, 0.25, 5.0, 5.5, 6.0,
    ]
    .iter()
    .map(|&v| Bf16::from_f32(v))
    .collect();
    // Times with equal neighbours at 1.0 and at the end (3.0, 3.0).
    let src = AlignedVec::from_slice(&[0.0f64, 1.0, 1.0, 3.0]);
    let sample = |i: usize| data[i * dim..(i + 1) * dim].to_vec();
    let cases: [(f64, Vec<Bf16>); 5] = [
        (-7.0, sample(0)), // before the first time: the first sample
        (0.0, sample(0)),  // on a time: that sample (w = 0)
        (1.0, sample(2)),  // on a repeated time: the last sample of that time
        (9.0, sample(3)),  // after the last time: the last sample
        (3.0, sample(3)),  // on the last time: the last sample
    ];
    let tgt: AlignedVec<f64> = cases.iter().map(|c| c.0).collect();
    let shape = ResampleShape {
        batch: 1,
        n_src: 4,
        n_tgt: cases.len(),
        dim,
    };
    for u in backends::exact() {
        let out =
            u.rt.resample(shape, &data, &src, &tgt, &ResampleLengths::default())
                .unwrap();
        for (j, (t, want)) in cases.iter().enumerate() {
            assert_eq!(
                &out[j * dim..(j + 1) * dim],
                &want[..],
                "{}: t = {t}",
                u.name
            );
        }
    }
}

#[test]
fn resample_repeated_final_time_takes_the_last_sample() {
    // src times (0, 2, 2): t = 2 is at (or past) the last time, so the last
    // sample; t = 1 interpolates in [0, 2].
    let data = AlignedVec::from_slice(&[0.0f32, 4.0, 9.0]);
    let src = AlignedVec::from_slice(&[0.0f32, 2.0, 2.0]);
    let tgt = AlignedVec::from_slice(&[2.0f32, 1.0]);
    let shape = ResampleShape {
        batch: 1,
        n_src: 3,
        n_tgt: 2,
        dim: 1,
    };
    for u in backends::exact() {
        let out =
            u.rt.resample(shape, &data, &src, &tgt, &ResampleLengths::default())
                .unwrap();
        assert_eq!(&out[..], &[9.0, 2.0], "{}", u.name);
    }
}

#[test]
fn resample_lengths_limit_reads_and_zero_the_tail() {
    let dim = 2;
    // Row 0 uses 2 of 3 samples (the third would make every answer 100) and
    // 1 of 2 targets; row 1 uses everything.
    let data = AlignedVec::from_slice(&[
        0.0f32, 0.0, 2.0, 4.0, 100.0, 100.0, 1.0, 1.0, 3.0, 3.0, 5.0, 5.0,
    ]);
    let src = AlignedVec::from_slice(&[0.0f32, 1.0, 1.5, 0.0, 1.0, 2.0]);
    let tgt = AlignedVec::from_slice(&[5.0f32, 0.5, 1.5, 0.5]);
    let src_len = AlignedVec::from_slice(&[2u64, 3]);
    let tgt_len = AlignedVec::from_slice(&[1u64, 2]);
    let lens = ResampleLengths {
        src: Some(&src_len),
        tgt: Some(&tgt_len),
    };
    let shape = ResampleShape {
        batch: 2,
        n_src: 3,
        n_tgt: 2,
        dim,
    };
    for u in backends::exact() {
        let mut out = AlignedVec::from_elem(f32::NAN, 8);
        u.rt.resample_into(shape, &data, &src, &tgt, &lens, &mut out)
            .unwrap();
        assert_eq!(
            &out[..],
            &[2.0, 4.0, 0.0, 0.0, 4.0, 4.0, 2.0, 2.0],
            "{}",
            u.name
        );
    }
}
