//! Recall from a memory store: add embeddings under ids, give some memories
//! a recency bias, then ask for the top-k of a few queries, with and without
//! an allow-list filter.
//!
//! Run: `cargo run --example recall`

use mnemo::{AlignedVec, Filter, Metric, Runtime, SearchOptions, Store, F16};

/// A small deterministic generator, so the example needs no crates.
fn values(seed: &mut u64, n: usize) -> AlignedVec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn main() -> Result<(), mnemo::Error> {
    let rt = Runtime::new()?;
    let info = rt.info()?;
    println!(
        "mnemo {} on {:?} ({}): {}",
        mnemo::version(),
        info.backend_active,
        info.device_name,
        info.reason
    );

    let (n, dim) = (10_000, 384);
    let mut seed = 42;
    // Half-precision storage halves the memory; scores accumulate in f32.
    let store = Store::<F16>::new(&rt, dim, Metric::Cosine)?;
    let ids: AlignedVec<u64> = (0..n as u64).map(|i| 1_000 + i).collect();
    store.add(&ids, &values(&mut seed, n * dim))?;

    // The last hundred memories are recent: a small additive boost.
    let recent = AlignedVec::from_slice(&ids[n - 100..]);
    store.set_bias(&recent, &AlignedVec::from_elem(0.05, 100))?;

    let queries = values(&mut seed, 3 * dim);
    let plain = store.search(&queries, 5)?;
    let biased = store.search_with(&queries, 5, &SearchOptions::new().apply_bias(true))?;
    let even: AlignedVec<u64> = ids.iter().copied().filter(|id| id % 2 == 0).collect();
    let filtered = store.search_with(
        &queries,
        5,
        &SearchOptions::new().filter(Filter::Ids(&even)),
    )?;

    for q in 0..3 {
        println!("query {q}");
        for (label, hits) in [
            ("plain", &plain[q]),
            ("recency", &biased[q]),
            ("even ids", &filtered[q]),
        ] {
            let row: Vec<String> = hits
                .iter()
                .map(|h| format!("{}:{:.4}", h.id, h.score))
                .collect();
            println!("  {label:9} {}", row.join("  "));
        }
    }
    Ok(())
}
