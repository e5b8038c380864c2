//! What the safe API costs over the raw C call: one query on a tiny CPU store
//! (8 vectors of 16 dimensions, k = 4), searched through `sys::mnemo_store_search`
//! on a store made with `sys`, and through `Store::search_into` (caller's
//! buffers) and `Store::search` (returns `Vec<Vec<Hit>>`) on a `Store` with the
//! same content. Rounds interleave the three; each figure is the median over
//! the rounds of each round's median, in nanoseconds.
//!
//! Run: `cargo run --release --example call_overhead [THREADS]` (THREADS: CPU
//! runtime threads, default 1; 0 = one per core).

use std::hint::black_box;
use std::os::raw::c_void;
use std::ptr;
use std::time::Instant;

use mnemo::{sys, AlignedVec, Metric, Runtime, SearchOptions, Store};

const N: usize = 8;
const DIM: usize = 16;
const K: usize = 4;
const ROUNDS: usize = 15;
const CALLS: usize = 20_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median nanoseconds of `CALLS` calls of `f`.
fn round(mut f: impl FnMut()) -> f64 {
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t0 = Instant::now();
        f();
        times.push(t0.elapsed().as_nanos() as f64);
    }
    median(times)
}

fn main() -> Result<(), mnemo::Error> {
    let threads: u32 = std::env::args()
        .nth(1)
        .map_or(1, |a| a.parse().expect("THREADS: an integer"));
    let data: AlignedVec<f32> = (0..N * DIM)
        .map(|i| ((i * 37 % 101) as f32) / 101.0 - 0.5)
        .collect();
    let ids: AlignedVec<u64> = (0..N as u64).collect();
    let query: AlignedVec<f32> = (0..DIM).map(|i| (i as f32 * 0.7).sin()).collect();

    // The safe API.
    let rt = Runtime::builder().cpu().threads(threads).build()?;
    let store = Store::<f32>::new(&rt, DIM, Metric::Dot)?;
    store.add(&ids, &data)?;
    let opts = SearchOptions::new();

    // The raw C calls: a runtime and a store of their own, the same content.
    let mut raw_rt: *mut sys::mnemo_runtime = ptr::null_mut();
    let mut raw_store: *mut sys::mnemo_store = ptr::null_mut();
    // SAFETY: valid options and out-pointers; the pointers passed to add hold
    // N ids and N * DIM floats, aligned (AlignedVec).
    unsafe {
        let mut ro = sys::mnemo_runtime_options_default();
        ro.backend = sys::MNEMO_BACKEND_CPU as i32;
        ro.num_threads = threads;
        assert_eq!(sys::mnemo_runtime_create(&ro, &mut raw_rt), 0);
        assert_eq!(
            sys::mnemo_store_create(
                raw_rt,
                DIM as u64,
                sys::MNEMO_DTYPE_F32 as i32,
                sys::MNEMO_METRIC_DOT as i32,
                &mut raw_store
            ),
            0
        );
        let status = sys::mnemo_store_add(
            raw_store,
            ids.as_ptr(),
            data.as_ptr() as *const c_void,
            sys::MNEMO_DTYPE_F32 as i32,
            N as u64,
        );
        assert_eq!(status, 0);
    }

    let mut out_ids = AlignedVec::from_elem(0u64, K);
    let mut out_scores = AlignedVec::from_elem(0f32, K);
    let mut raw_ids = AlignedVec::from_elem(0u64, K);
    let mut raw_scores = AlignedVec::from_elem(0f32, K);
    let (q, ip, sp) = (
        query.as_ptr(),
        raw_ids.as_mut_ptr(),
        raw_scores.as_mut_ptr(),
    );
    let mut raw = || {
        // SAFETY: live store; q holds DIM floats, ip and sp K entries, aligned.
        let status =
            unsafe { sys::mnemo_store_search(raw_store, q, 1, K as u64, ptr::null(), ip, sp) };
        assert_eq!(black_box(status), 0);
    };
    let mut into = || {
        store
            .search_into(&query, K, &opts, &mut out_ids, &mut out_scores)
            .unwrap();
        black_box(&out_ids);
    };
    let mut hits = || {
        black_box(store.search(&query, K).unwrap());
    };
    for _ in 0..2_000 {
        raw();
        into();
        hits();
    }
    let (mut t_raw, mut t_into, mut t_hits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        t_raw.push(round(&mut raw));
        t_into.push(round(&mut into));
        t_hits.push(round(&mut hits));
    }
    let (raw_ns, into_ns, hits_ns) = (median(t_raw), median(t_into), median(t_hits));
    assert_eq!(&raw_ids[..], &out_ids[..], "the two stores answer alike");
    println!(
        "mnemo {}, CPU runtime threads={threads}, 1 query on {N} x {DIM} f32, k={K}; \
         median ns per call ({ROUNDS} rounds x {CALLS} calls)",
        mnemo::version()
    );
    println!("  sys::mnemo_store_search (raw)   {raw_ns:9.0} ns");
    println!(
        "  Store::search_into              {into_ns:9.0} ns  +{:6.0} ns over the raw call",
        into_ns - raw_ns
    );
    println!(
        "  Store::search (Vec<Vec<Hit>>)   {hits_ns:9.0} ns  +{:6.0} ns over the raw call",
        hits_ns - raw_ns
    );
    let worst = (into_ns.max(hits_ns) - raw_ns) / 1e3;
    println!(
        "issue 30 target: safe API over the C call <= 1 us: {worst:.3} us ({})",
        if worst <= 1.0 { "met" } else { "missed" }
    );
    // SAFETY: the store, then its runtime, each destroyed once.
    unsafe {
        sys::mnemo_store_destroy(raw_store);
        sys::mnemo_runtime_destroy(raw_rt);
    }
    Ok(())
}
