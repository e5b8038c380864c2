//! A tiny deterministic generator (SplitMix64), so tests need no crates and
//! every failure is reproducible from its seed.

use mnemo::{AlignedVec, Storage};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x005e_ed0f_3e30_u64)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Values in [-1, 1), never exactly zero.
    pub fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| loop {
                let v = self.range(-1.0, 1.0) as f32;
                if v != 0.0 {
                    break v;
                }
            })
            .collect()
    }

    /// `rows` random vectors of `dim` values, each scaled to unit length in
    /// f64 before rounding to `T`.
    pub fn unit_rows<T: Storage>(&mut self, rows: usize, dim: usize) -> AlignedVec<T> {
        let raw = self.values(rows * dim);
        let mut out = AlignedVec::with_capacity(rows * dim);
        for row in raw.chunks(dim) {
            let norm = row.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
            out.extend(
                row.iter()
                    .map(|&x| T::from_f32_rounded((x as f64 / norm) as f32)),
            );
        }
        out
    }

    /// Random values rounded to `T`.
    pub fn rows<T: Storage>(&mut self, rows: usize, dim: usize) -> AlignedVec<T> {
        self.values(rows * dim)
            .into_iter()
            .map(T::from_f32_rounded)
            .collect()
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}
