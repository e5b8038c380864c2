//! Store search against the reference: every metric and dtype, k from 1 to
//! past N, filters, bias, updates, FAST precision and the tie rule.

use std::collections::{HashMap, HashSet};

use mnemo::{AlignedVec, Bf16, Filter, Hit, Metric, SearchOptions, Storage, Store, F16, NO_ID};

use crate::common::backends::{self, Under};
use crate::common::bounds::{check_top_k, score_tol};
use crate::common::prng::Rng;
use crate::common::reference::{self, norm};

#[derive(Clone, Copy, PartialEq, Debug)]
enum FilterKind {
    All,
    Ids,
    Bitmap,
}

#[derive(Clone, Copy)]
struct Case {
    n: usize,
    dim: usize,
    nq: usize,
    filter: FilterKind,
    bias: bool,
    /// Extra room for FAST candidate search (before exact re-scoring).
    fast: bool,
}

/// Distinct random ids, never NO_ID.
fn random_ids(rng: &mut Rng, n: usize) -> Vec<u64> {
    let mut seen = HashSet::new();
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let id = rng.next_u64() >> rng.below(40);
        if id != NO_ID && seen.insert(id) {
            ids.push(id);
        }
    }
    ids
}

fn vectors(rng: &mut Rng, metric: Metric, rows: usize, dim: usize) -> AlignedVec<f32> {
    // Dot is bounded for unit vectors; the other metrics get raw values.
    if metric == Metric::Dot {
        rng.unit_rows(rows, dim)
    } else {
        rng.rows(rows, dim)
    }
}

/// What the store holds for f32 input: each value rounded to T.
fn stored<T: Storage>(values: &[f32]) -> Vec<f64> {
    values
        .iter()
        .map(|&v| T::from_f32_rounded(v).to_f32_exact() as f64)
        .collect()
}

fn ks(n: usize) -> Vec<usize> {
    let mut ks = vec![1, 10, n, n + 3];
    ks.sort_unstable();
    ks.dedup();
    ks
}

fn run_case<T: Storage>(under: &[Under], metric: Metric, case: Case, seed: u64) {
    let Case {
        n,
        dim,
        nq,
        filter,
        bias,
        fast,
    } = case;
    let mut rng = Rng::new(seed);
    let ids = random_ids(&mut rng, n);
    let data = vectors(&mut rng, metric, n, dim);
    let queries = vectors(&mut rng, metric, nq, dim);
    let biases: AlignedVec<f32> = (0..n).map(|_| rng.range(-0.3, 0.3) as f32).collect();
    let mut allowed: Vec<u64> = ids.iter().copied().filter(|_| rng.below(2) == 0).collect();
    let unknown = random_ids(&mut rng, 3);
    let data64 = stored::<T>(&data);
    let q64: Vec<f64> = queries.iter().map(|&v| v as f64).collect();
    let row = |m: &[f64], i: usize| m[i * dim..(i + 1) * dim].to_vec();

    // Reference ranking keys of the candidates of each query.
    let candidates: Vec<usize> = (0..n)
        .filter(|&i| filter == FilterKind::All || allowed.contains(&ids[i]))
        .collect();
    let mut keys = Vec::new();
    let mut tols: Vec<HashMap<u64, f64>> = Vec::new();
    for q in 0..nq {
        let qv = row(&q64, q);
        let mut row_keys = Vec::new();
        let mut row_tols = HashMap::new();
        for &i in &candidates {
            let v = row(&data64, i);
            let s = reference::score(metric, &qv, &v);
            let b = if bias { biases[i] as f64 } else { 0.0 };
            let key = reference::ranked(metric, s, b);
            // Adding the bias in f32 may round once more.
            let tol = score_tol(metric, s, norm(&qv), norm(&v)) + f32::EPSILON as f64 * key.abs();
            row_keys.push((ids[i], key));
            row_tols.insert(ids[i], tol);
        }
        keys.push(row_keys);
        tols.push(row_tols);
    }
    let slack = if fast {
        let scale = keys.iter().flatten().map(|k| k.1.abs()).fold(1.0, f64::max);
        4e-3 * if metric == Metric::L2Sq { scale } else { 1.0 }
    } else {
        0.0
    };

    // Unknown ids in an allow-list are ignored.
    allowed.extend(&unknown);
    let mut all_results: Vec<(&str, Vec<Vec<Vec<Hit>>>)> = Vec::new();
    for b in under {
        let what = |k: usize, q: usize| {
            format!(
                "{} {metric:?} {:?} n={n} dim={dim} k={k} q={q} filter={filter:?} bias={bias}",
                b.name,
                T::DTYPE
            )
        };
        let store = Store::<T>::new(&b.rt, dim, metric).unwrap();
        // Two batches, so growth is exercised too.
        let half = n / 2;
        store
            .add(&AlignedVec::from_slice(&ids[..half]), &data[..half * dim])
            .and_then(|_| {
                store.add(
                    &AlignedVec::from_slice(&ids[half..]),
                    &AlignedVec::from_slice(&data[half * dim..]),
                )
            })
            .unwrap_or_else(|e| panic!("{}: add: {e}", b.name));
        assert_eq!(store.count().unwrap(), n as u64);
        // The stored values are the round-to-nearest-even of the input.
        for i in [0, n / 3, n - 1] {
            let got = store.get(ids[i]).unwrap();
            let want: Vec<f32> = data64[i * dim..(i + 1) * dim]
                .iter()
                .map(|&v| v as f32)
                .collect();
            assert_eq!(got.as_slice(), &want[..], "{}: get({})", b.name, ids[i]);
        }
        if bias {
            store
                .set_bias(&AlignedVec::from_slice(&ids), &biases)
                .unwrap();
        }
        let allowed_ids = AlignedVec::from_slice(&allowed);
        let (bitmap, slot_count) = store.slot_bitmap(&allowed).unwrap();
        let filter_arg = match filter {
            FilterKind::All => Filter::None,
            FilterKind::Ids => Filter::Ids(&allowed_ids),
            FilterKind::Bitmap => Filter::SlotBitmap {
                words: &bitmap,
                slot_count,
            },
        };
        let opts = SearchOptions::new().filter(filter_arg).apply_bias(bias);
        let mut per_k = Vec::new();
        for k in ks(n) {
            let hits = store
                .search_with(&queries, k, &opts)
                .unwrap_or_else(|e| panic!("{}: {e}", what(k, 0)));
            assert_eq!(hits.len(), nq);
            for (q, row_hits) in hits.iter().enumerate() {
                let tol = |id: u64| tols[q][&id];
                check_top_k(&what(k, q), metric, row_hits, &keys[q], k, &tol, slack);
            }
            per_k.push(hits);
        }
        // The raw form with k past the candidates: padding is NO_ID and NaN.
        let k = n + 3;
        let mut raw_ids = AlignedVec::from_elem(0u64, nq * k);
        let mut raw_scores = AlignedVec::from_elem(7.0f32, nq * k);
        store
            .search_into(&queries, k, &opts, &mut raw_ids, &mut raw_scores)
            .unwrap_or_else(|e| panic!("{}: {e}", what(k, 0)));
        let widest = per_k.last().expect("k = n + 3 was searched");
        for (q, row_hits) in widest.iter().enumerate() {
            let ids_row = &raw_ids[q * k..(q + 1) * k];
            let scores_row = &raw_scores[q * k..(q + 1) * k];
            for (slot, (&id, &score)) in ids_row.iter().zip(scores_row).enumerate() {
                match row_hits.get(slot) {
                    Some(h) => assert_eq!((id, score), (h.id, h.score), "{}", what(k, q)),
                    None => assert!(id == NO_ID && score.is_nan(), "{}: padding", what(k, q)),
                }
            }
        }
        all_results.push((b.name, per_k));
    }

    // Backends agree rank by rank: each r-th score is within the bound of the
    // r-th reference order statistic, so two of them within twice that.
    let worst_tol = tols
        .iter()
        .flat_map(|t| t.values().copied())
        .fold(0.0, f64::max);
    for (a, b) in all_results.iter().zip(all_results.iter().skip(1)) {
        for (ki, (ka, kb)) in a.1.iter().zip(&b.1).enumerate() {
            for (q, (ra, rb)) in ka.iter().zip(kb).enumerate() {
                assert_eq!(ra.len(), rb.len(), "{} vs {}: k#{ki} q={q}", a.0, b.0);
                for (r, (ha, hb)) in ra.iter().zip(rb).enumerate() {
                    let diff = (ha.score as f64 - hb.score as f64).abs();
                    assert!(
                        diff <= 2.0 * worst_tol + 2.0 * slack,
                        "{} vs {} {metric:?}: k#{ki} q={q} rank {r}: {ha:?} vs {hb:?}",
                        a.0,
                        b.0
                    );
                }
            }
        }
    }
}

const SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (5, 7, 3),
    (31, 33, 2),
    (200, 129, 17),
    (1000, 384, 8),
];

fn run_shapes<T: Storage>(seed: u64) {
    let under = backends::exact();
    for (s, &(n, dim, nq)) in SHAPES.iter().enumerate() {
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
            let case = Case {
                n,
                dim,
                nq,
                filter: FilterKind::All,
                bias: false,
                fast: false,
            };
            run_case::<T>(&under, metric, case, seed * 100 + s as u64);
        }
    }
}

#[test]
fn search_f32() {
    run_shapes::<f32>(21);
}

#[test]
fn search_f16() {
    run_shapes::<F16>(22);
}

#[test]
fn search_bf16() {
    run_shapes::<Bf16>(23);
}

#[test]
fn search_with_filters_and_bias() {
    let under = backends::exact();
    let mut seed = 300;
    for filter in [FilterKind::All, FilterKind::Ids, FilterKind::Bitmap] {
        for bias in [false, true] {
            for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
                seed += 1;
                let case = Case {
                    n: 157,
                    dim: 33,
                    nq: 5,
                    filter,
                    bias,
                    fast: false,
                };
                run_case::<f32>(&under, metric, case, seed);
                run_case::<Bf16>(&under, metric, case, seed);
            }
        }
    }
}

#[test]
fn search_fast_precision_returns_exact_scores() {
    let under = backends::fast();
    for (i, metric) in [Metric::Cosine, Metric::Dot, Metric::L2Sq]
        .into_iter()
        .enumerate()
    {
        let case = Case {
            n: 3000,
            dim: 128,
            nq: 24,
            filter: FilterKind::All,
            bias: false,
            fast: true,
        };
        run_case::<f32>(&under, metric, case, 400 + i as u64);
        run_case::<F16>(&under, metric, case, 410 + i as u64);
    }
}

/// Identical vectors under different ids score identically, so the order
/// among them is the tie rule alone: smaller id first, also where k cuts a
/// group of equals.
#[test]
fn ties_go_to_the_smaller_id() {
    for b in backends::exact() {
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
            let (groups, copies, dim) = (6, 5, 19);
            let mut rng = Rng::new(500);
            let distinct = vectors(&mut rng, metric, groups, dim);
            let mut ids = random_ids(&mut rng, groups * copies);
            rng.shuffle(&mut ids);
            let mut data = AlignedVec::new();
            for g in 0..groups * copies {
                data.extend_from_slice(&distinct[(g % groups) * dim..(g % groups + 1) * dim]);
            }
            let store = Store::<f32>::new(&b.rt, dim, metric).unwrap();
            store.add(&AlignedVec::from_slice(&ids), &data).unwrap();
            let query = vectors(&mut rng, metric, 1, dim);
            let q64: Vec<f64> = query.iter().map(|&v| v as f64).collect();
            let candidates: Vec<(u64, f64)> = (0..groups * copies)
                .map(|i| {
                    let v: Vec<f64> = distinct[(i % groups) * dim..(i % groups + 1) * dim]
                        .iter()
                        .map(|&x| x as f64)
                        .collect();
                    (ids[i], reference::score(metric, &q64, &v))
                })
                .collect();
            for k in [1, 3, copies + 2, groups * copies] {
                let want = reference::top_k(metric, &candidates, k);
                let got = store.search(&query, k).unwrap().remove(0);
                let got_ids: Vec<u64> = got.iter().map(|h| h.id).collect();
                let want_ids: Vec<u64> = want.iter().map(|c| c.0).collect();
                assert_eq!(got_ids, want_ids, "{} {metric:?} k={k}", b.name);
                for (h, w) in got.iter().zip(&want) {
                    // Equal reference scores must come back bitwise equal.
                    let same: Vec<&Hit> = got
                        .iter()
                        .filter(|o| candidates.iter().any(|c| c.0 == o.id && c.1 == w.1))
                        .collect();
                    assert!(
                        same.iter().all(|o| o.score.to_bits() == h.score.to_bits()),
                        "{} {metric:?}: equal vectors scored differently: {same:?}",
                        b.name
                    );
                }
            }
        }
    }
}

/// Upserts, removals (with compaction), re-adds and bias surviving upserts,
/// checked against a model of what the store should hold.
#[test]
fn search_after_updates() {
    for b in backends::exact() {
        for metric in [Metric::Cosine, Metric::L2Sq] {
            let (n, dim) = (120, 21);
            let mut rng = Rng::new(600);
            let store = Store::<F16>::new(&b.rt, dim, metric).unwrap();
            let mut model: HashMap<u64, (Vec<f64>, f64)> = HashMap::new();
            let ids = random_ids(&mut rng, n);
            let data = vectors(&mut rng, metric, n, dim);
            store.add(&AlignedVec::from_slice(&ids), &data).unwrap();
            for (i, &id) in ids.iter().enumerate() {
                model.insert(id, (stored::<F16>(&data[i * dim..(i + 1) * dim]), 0.0));
            }
            let bias_ids = AlignedVec::from_slice(&ids[..10]);
            let biases: AlignedVec<f32> = (0..10).map(|i| 0.05 * i as f32).collect();
            store.set_bias(&bias_ids, &biases).unwrap();
            for i in 0..10 {
                model.get_mut(&ids[i]).unwrap().1 = biases[i] as f64;
            }
            // Upsert the first 20 (bias kept), one id twice in a call: the
            // last vector wins.
            let mut up_ids: Vec<u64> = ids[..20].to_vec();
            up_ids.push(ids[0]);
            let up = vectors(&mut rng, metric, up_ids.len(), dim);
            store.add(&AlignedVec::from_slice(&up_ids), &up).unwrap();
            for (i, &id) in up_ids.iter().enumerate() {
                model.get_mut(&id).unwrap().0 = stored::<F16>(&up[i * dim..(i + 1) * dim]);
            }
            // Remove more than a quarter, so the store compacts.
            let gone: Vec<u64> = ids[30..80].to_vec();
            let removed = store.remove(&AlignedVec::from_slice(&gone)).unwrap();
            assert_eq!(removed, 50, "{}", b.name);
            for id in &gone {
                model.remove(id);
            }
            assert_eq!(store.count().unwrap(), model.len() as u64);
            assert_eq!(
                store.slot_count().unwrap(),
                model.len() as u64,
                "{}: compacted",
                b.name
            );

            let queries = vectors(&mut rng, metric, 4, dim);
            let opts = SearchOptions::new().apply_bias(true);
            for k in [1, 7, model.len()] {
                let hits = store.search_with(&queries, k, &opts).unwrap();
                for (q, row_hits) in hits.iter().enumerate() {
                    let qv: Vec<f64> = queries[q * dim..(q + 1) * dim]
                        .iter()
                        .map(|&v| v as f64)
                        .collect();
                    let keys: Vec<(u64, f64)> = model
                        .iter()
                        .map(|(&id, (v, bias))| {
                            (
                                id,
                                reference::ranked(metric, reference::score(metric, &qv, v), *bias),
                            )
                        })
                        .collect();
                    let tol = |id: u64| {
                        let v = &model[&id].0;
                        let s = reference::score(metric, &qv, v);
                        score_tol(metric, s, norm(&qv), norm(v)) + 1e-7 * s.abs().max(1.0)
                    };
                    let what = format!("{} {metric:?} after updates k={k} q={q}", b.name);
                    check_top_k(&what, metric, row_hits, &keys, k, &tol, 0.0);
                }
            }
        }
    }
}
