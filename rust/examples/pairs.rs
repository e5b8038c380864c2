//! Episodic pair scoring: one score per (src, tgt) index pair over an
//! embedding table, in input order, for u32 indices into a bf16 table.
//!
//! Run: `cargo run --example pairs`

use mnemo::{AlignedVec, Bf16, Metric, Runtime};

fn main() -> Result<(), mnemo::Error> {
    let rt = Runtime::new()?;
    let (n_items, dim, n_pairs) = (50_000usize, 256usize, 200_000usize);

    let mut state = 7u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let table: AlignedVec<Bf16> = (0..n_items * dim)
        .map(|_| Bf16::from_f32((next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5))
        .collect();
    // Unit rows, so dot products are cosines.
    let table = rt.normalize_rows(&table, dim)?;
    let src: AlignedVec<u32> = (0..n_pairs)
        .map(|_| (next() % n_items as u64) as u32)
        .collect();
    let tgt: AlignedVec<u32> = (0..n_pairs)
        .map(|_| (next() % n_items as u64) as u32)
        .collect();

    let started = std::time::Instant::now();
    let scores = rt.score_pairs(Metric::Dot, &table, dim, &src, &tgt)?;
    let elapsed = started.elapsed();

    let mean = scores.iter().map(|&s| s as f64).sum::<f64>() / n_pairs as f64;
    let best = scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(p, s)| (p, *s))
        .unwrap_or((0, f32::NAN));
    println!(
        "{n_pairs} pairs over {n_items} x {dim} bf16 in {elapsed:?} ({:?})",
        rt.info()?.backend_active
    );
    println!(
        "mean score {mean:.5}; best pair {} ({} -> {}) = {:.4}",
        best.0, src[best.0], tgt[best.0], best.1
    );

    // An index past the table is refused, naming the pair; nothing is written.
    let bad = AlignedVec::from_slice(&[0u32, n_items as u32]);
    let err = rt
        .score_pairs(Metric::Dot, &table, dim, &bad, &bad)
        .unwrap_err();
    println!("out of range: {err}");
    Ok(())
}
