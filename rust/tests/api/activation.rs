//! Activation search (relevance, recency, importance and bias) against a
//! float64 reference: plain and min-max normalised, every metric and dtype,
//! times spanning decades and seconds, equal and future times, half-life
//! extremes, filters, touch, the metadata calls and their errors, and
//! persistence through save/open and a durable journal.

use mnemo::{
    Activation, AlignedVec, Bf16, DurableOptions, Filter, Metric, Runtime, SearchOptions, Status,
    Storage, Store, SyncPolicy, F16,
};

use crate::common::backends;
use crate::common::bounds;
use crate::common::prng::Rng;
use crate::common::reference;

/// A UNIX time in 2023.
const NOW: f64 = 1.7e9;

/// A store and what it should hold.
struct Memories<T: Storage> {
    store: Store<T>,
    metric: Metric,
    dim: usize,
    ids: AlignedVec<u64>,
    held: Vec<f64>,
    times: AlignedVec<f64>,
    importance: AlignedVec<f32>,
    bias: AlignedVec<f32>,
}

/// Whole seconds decades, hours and seconds before NOW, and some after it.
fn random_times(rng: &mut Rng, n: usize) -> AlignedVec<f64> {
    (0..n)
        .map(|_| {
            let span = [3e9, 4e4, 60.0, -600.0][rng.below(4) as usize];
            (NOW - span * rng.range(1e-3, 1.0)).floor()
        })
        .collect()
}

impl<T: Storage> Memories<T> {
    fn new(rt: &Runtime, rng: &mut Rng, n: usize, dim: usize, metric: Metric) -> Self {
        let store = Store::<T>::new(rt, dim, metric).unwrap();
        let ids: AlignedVec<u64> = (0..n as u64).map(|i| 1000 + 7 * i + rng.below(5)).collect();
        let vectors = rng.rows::<T>(n, dim);
        let times = random_times(rng, n);
        let importance: AlignedVec<f32> = (0..n).map(|_| rng.range(0.0, 10.0) as f32).collect();
        let bias: AlignedVec<f32> = (0..n).map(|_| rng.range(-0.3, 0.3) as f32).collect();
        store
            .add_memories_native(&ids, &vectors, Some(&times), Some(&importance))
            .unwrap();
        store.set_bias(&ids, &bias).unwrap();
        Memories {
            store,
            metric,
            dim,
            ids,
            held: reference::to_f64(&vectors),
            times,
            importance,
            bias,
        }
    }

    /// (id, returned score, bound) of every candidate in float64.
    fn reference(
        &self,
        q: &[f64],
        a: &Activation,
        now: f64,
        apply_bias: bool,
        allow: Option<&[u64]>,
    ) -> Vec<(u64, f64, f64)> {
        let sign = if self.metric.higher_is_better() {
            1.0
        } else {
            -1.0
        };
        struct Term {
            id: u64,
            rel: f64,
            rel_tol: f64,
            rec: f64,
            rec_tol: f64,
            imp: f64,
            bias: f64,
        }
        let mut terms = Vec::new();
        for (i, &id) in self.ids.iter().enumerate() {
            if allow.is_some_and(|a| !a.contains(&id)) {
                continue;
            }
            let v = &self.held[i * self.dim..(i + 1) * self.dim];
            let raw = reference::score(self.metric, q, v);
            let (rec, rec_tol) = recency(now, self.times[i], a.half_life);
            terms.push(Term {
                id,
                rel: sign * raw,
                rel_tol: bounds::score_tol(
                    self.metric,
                    raw,
                    reference::norm(q),
                    reference::norm(v),
                ),
                rec,
                rec_tol,
                imp: self.importance[i] as f64,
                bias: if apply_bias { self.bias[i] as f64 } else { 0.0 },
            });
        }
        let range = |f: &dyn Fn(&Term) -> f64| {
            let lo = terms.iter().map(f).fold(f64::INFINITY, f64::min);
            let hi = terms.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
            (lo, hi)
        };
        let (rlo, rhi) = range(&|t| t.rel);
        let (clo, chi) = range(&|t| t.rec);
        let (ilo, ihi) = range(&|t| t.imp);
        let rtol = terms.iter().map(|t| t.rel_tol).fold(0.0, f64::max);
        let ctol = terms.iter().map(|t| t.rec_tol).fold(0.0, f64::max);
        let (wr, wc, wi) = (
            a.w_relevance as f64,
            a.w_recency as f64,
            a.w_importance as f64,
        );
        terms
            .iter()
            .map(|t| {
                let (mut rel, mut rel_tol, mut rec, mut rec_tol, mut imp, mut imp_tol) =
                    (t.rel, t.rel_tol, t.rec, t.rec_tol, t.imp, 0.0);
                if a.normalize {
                    (rel, rel_tol) = scaled(t.rel, rlo, rhi, rtol);
                    (rec, rec_tol) = scaled(t.rec, clo, chi, ctol);
                    (imp, imp_tol) = scaled(t.imp, ilo, ihi, 0.0);
                }
                let act = wr * rel + wc * rec + wi * imp + t.bias;
                let tol = wr.abs() * rel_tol
                    + wc.abs() * rec_tol
                    + wi.abs() * imp_tol
                    + 2f64.powi(-21)
                        * ((wr * rel).abs() + (wc * rec).abs() + (wi * imp).abs() + t.bias.abs());
                (t.id, sign * act, tol)
            })
            .collect()
    }

    fn check(&self, what: &str, queries: &[f32], k: usize, opts: &SearchOptions<'_>) {
        let a = opts.activation.expect("an activation search");
        let now = opts.now.expect("a fixed now");
        let allow = match opts.filter {
            Filter::Ids(ids) => Some(ids),
            _ => None,
        };
        let hits = self.store.search_with(queries, k, opts).unwrap();
        for (row, q) in queries.chunks(self.dim).enumerate() {
            let q: Vec<f64> = q.iter().map(|&x| x as f64).collect();
            let want = self.reference(&q, &a, now, opts.apply_bias, allow);
            let keys: Vec<(u64, f64)> = want.iter().map(|w| (w.0, w.1)).collect();
            let tol = |id: u64| want.iter().find(|w| w.0 == id).unwrap().2;
            bounds::check_top_k(
                &format!("{what} query {row}"),
                self.metric,
                &hits[row],
                &keys,
                k,
                &tol,
                0.0,
            );
        }
    }
}

/// 2^(-(now - t) / half_life), 1 for t >= now, and the bound of its f32
/// evaluation (an f32 power of an f64 age).
fn recency(now: f64, t: f64, half_life: f64) -> (f64, f64) {
    let age = now - t;
    if age <= 0.0 {
        return (1.0, 0.0);
    }
    let x = age / half_life;
    let rec = (-x).exp2();
    let tol = if rec > 0.0 {
        rec * (x * 2f64.powi(-22) + 2f64.powi(-21))
    } else {
        0.0
    };
    (rec, tol + 2f64.powi(-140))
}

/// Min-max scaling (0.5 when every candidate is equal) and its bound from
/// values each known within `tol`.
fn scaled(x: f64, lo: f64, hi: f64, tol: f64) -> (f64, f64) {
    if hi <= lo {
        return (0.5, 0.0);
    }
    ((x - lo) / (hi - lo), 4.0 * tol / (hi - lo) + 2f64.powi(-20))
}

fn weights(rng: &mut Rng) -> [Activation; 3] {
    [
        Activation::new()
            .w_recency(1.0)
            .w_importance(0.1)
            .half_life(3600.0),
        Activation::new()
            .w_relevance(0.5)
            .w_recency(2.0)
            .w_importance(-0.05)
            .half_life(86400.0 * 365.0),
        Activation::new()
            .w_relevance(rng.range(-1.0, 1.0) as f32)
            .w_recency(rng.range(0.0, 3.0) as f32)
            .w_importance(rng.range(0.0, 0.2) as f32)
            .half_life(rng.range(1.0, 1e6)),
    ]
}

fn matches_f64<T: Storage>(seed: u64) {
    let mut rng = Rng::new(seed);
    for u in backends::exact() {
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
            for (n, dim, k) in [(7usize, 3usize, 7usize), (61, 19, 10), (300, 130, 300)] {
                let mem = Memories::<T>::new(&u.rt, &mut rng, n, dim, metric);
                let q = AlignedVec::from_slice(&rng.values(3 * dim));
                for normalize in [false, true] {
                    for (j, a) in weights(&mut rng).into_iter().enumerate() {
                        let opts = SearchOptions::new()
                            .activation(a.normalize(normalize))
                            .now(NOW)
                            .apply_bias(j > 0);
                        let what = format!(
                            "{} {:?} {metric:?} n={n} dim={dim} normalize={normalize} weights {j}",
                            u.name,
                            T::DTYPE
                        );
                        mem.check(&what, &q, k, &opts);
                    }
                }
            }
        }
    }
}

#[test]
fn activation_matches_f64_f32() {
    matches_f64::<f32>(0xac71);
}

#[test]
fn activation_matches_f64_f16() {
    matches_f64::<F16>(0xac72);
}

#[test]
fn activation_matches_f64_bf16() {
    matches_f64::<Bf16>(0xac73);
}

#[test]
fn query_batches() {
    let mut rng = Rng::new(0xba7c);
    for u in backends::exact() {
        let mem = Memories::<f32>::new(&u.rt, &mut rng, 500, 64, Metric::Cosine);
        // A batch large enough for the GEMM path.
        let q = AlignedVec::from_slice(&rng.values(40 * 64));
        for normalize in [false, true] {
            let a = Activation::new()
                .w_recency(0.7)
                .w_importance(0.02)
                .half_life(7200.0)
                .normalize(normalize);
            let opts = SearchOptions::new().activation(a).now(NOW);
            mem.check(&format!("{} batch", u.name), &q, 12, &opts);
        }
    }
}

#[test]
fn equal_and_future_times() {
    let mut rng = Rng::new(0xe9a1);
    for u in backends::exact() {
        let mut mem = Memories::<f32>::new(&u.rt, &mut rng, 80, 16, Metric::Dot);
        let q = AlignedVec::from_slice(&rng.values(2 * 16));
        // Equal times: a normalised recency is 0.5 for all, the ranking is
        // relevance's.
        mem.times = AlignedVec::from_elem(NOW - 1234.5, 80);
        mem.store.set_times(&mem.ids, &mem.times).unwrap();
        let a = Activation::new().w_recency(3.0).normalize(true);
        let opts = SearchOptions::new().activation(a).now(NOW);
        mem.check(&format!("{} equal", u.name), &q, 10, &opts);
        let plain = mem.store.search(&q, 10).unwrap();
        let act = mem.store.search_with(&q, 10, &opts).unwrap();
        for (p, a) in plain.iter().zip(&act) {
            let ids = |h: &Vec<mnemo::Hit>| h.iter().map(|h| h.id).collect::<Vec<_>>();
            assert_eq!(ids(p), ids(a), "{}: equal times change nothing", u.name);
        }
        // Future times count as now: recency 1 for every memory.
        mem.times = (0..80).map(|_| NOW + rng.range(1.0, 1e9)).collect();
        mem.store.set_times(&mem.ids, &mem.times).unwrap();
        let rec_only = Activation::new().w_relevance(0.0).w_recency(1.0);
        let opts = SearchOptions::new().activation(rec_only).now(NOW);
        let hits = mem.store.search_with(&q[..16], 80, &opts).unwrap();
        assert!(hits[0].iter().all(|h| h.score == 1.0), "{}", u.name);
        let mut sorted = mem.ids.to_vec();
        sorted.sort_unstable();
        // Equal scores: ties to the smaller id.
        assert_eq!(
            hits[0].iter().map(|h| h.id).collect::<Vec<_>>(),
            sorted,
            "{}",
            u.name
        );
        let opts = SearchOptions::new()
            .activation(Activation::new().w_recency(2.0).half_life(1.0))
            .now(NOW);
        mem.check(&format!("{} future", u.name), &q, 9, &opts);
    }
}

#[test]
fn half_life_extremes() {
    let mut rng = Rng::new(0x4a1f);
    for u in backends::exact() {
        for half_life in [f64::INFINITY, 1e300, 1e-300, f64::from_bits(1)] {
            let mut mem = Memories::<f32>::new(&u.rt, &mut rng, 100, 12, Metric::Dot);
            // Age 0: recency 1 even for a vanishing half-life.
            for t in &mut mem.times[..10] {
                *t = NOW;
            }
            mem.store.set_times(&mem.ids, &mem.times).unwrap();
            let q = AlignedVec::from_slice(&rng.values(3 * 12));
            for normalize in [false, true] {
                let a = Activation::new()
                    .w_recency(2.0)
                    .w_importance(0.01)
                    .half_life(half_life)
                    .normalize(normalize);
                let opts = SearchOptions::new().activation(a).now(NOW);
                mem.check(
                    &format!("{} half-life {half_life:e}", u.name),
                    &q,
                    15,
                    &opts,
                );
            }
            let rec_only = Activation::new()
                .w_relevance(0.0)
                .w_recency(1.0)
                .half_life(half_life);
            let opts = SearchOptions::new().activation(rec_only).now(NOW);
            let hits = mem.store.search_with(&q[..12], 100, &opts).unwrap();
            for h in &hits[0] {
                let i = mem.ids.iter().position(|&id| id == h.id).unwrap();
                let want = if half_life == f64::INFINITY || mem.times[i] >= NOW {
                    1.0
                } else if half_life < 1e-200 {
                    0.0
                } else {
                    recency(NOW, mem.times[i], half_life).0
                };
                bounds::assert_close(
                    &format!("{} half-life {half_life:e} id {}", u.name, h.id),
                    h.score as f64,
                    want,
                    1e-6 * want,
                );
            }
        }
    }
}

#[test]
fn filters_and_normalisation_over_the_candidates() {
    let mut rng = Rng::new(0xf117);
    for u in backends::exact() {
        let mem = Memories::<f32>::new(&u.rt, &mut rng, 150, 20, Metric::L2Sq);
        let q = AlignedVec::from_slice(&rng.values(3 * 20));
        let mut allowed: Vec<u64> = mem.ids.to_vec();
        rng.shuffle(&mut allowed);
        let allowed = AlignedVec::from_slice(&allowed[..40]);
        for a in [
            Activation::new()
                .w_relevance(0.1)
                .w_recency(1.0)
                .w_importance(0.05)
                .half_life(1e5),
            Activation::new()
                .w_recency(1.0)
                .w_importance(1.0)
                .normalize(true),
        ] {
            let opts = SearchOptions::new()
                .activation(a)
                .now(NOW)
                .filter(Filter::Ids(&allowed));
            mem.check(&format!("{} filter ids", u.name), &q, 25, &opts);
            // The same through a slot bitmap: the same answers.
            let (words, slot_count) = mem.store.slot_bitmap(&allowed).unwrap();
            let by_bitmap = opts.filter(Filter::SlotBitmap {
                words: &words,
                slot_count,
            });
            assert_eq!(
                mem.store.search_with(&q, 25, &by_bitmap).unwrap(),
                mem.store.search_with(&q, 25, &opts).unwrap(),
                "{}: bitmap and id filters agree",
                u.name
            );
        }
        // One candidate: every normalised term is 0.5.
        let one = AlignedVec::from_slice(&[mem.ids[3]]);
        let a = Activation::new()
            .w_recency(1.0)
            .w_importance(1.0)
            .normalize(true);
        let opts = SearchOptions::new()
            .activation(a)
            .now(NOW)
            .filter(Filter::Ids(&one))
            .apply_bias(true);
        let hits = mem.store.search_with(&q[..20], 3, &opts).unwrap();
        assert_eq!(hits[0].len(), 1);
        // l2sq returns the negated activation.
        bounds::assert_close(
            u.name,
            hits[0][0].score as f64,
            -(1.5 + mem.bias[3] as f64),
            1e-6,
        );
    }
}

#[test]
fn touch_sets_the_times_of_what_is_returned() {
    let mut rng = Rng::new(0x70c4);
    for u in backends::exact() {
        let mem = Memories::<f32>::new(&u.rt, &mut rng, 60, 9, Metric::Cosine);
        let q = AlignedVec::from_slice(&rng.values(2 * 9));
        let a = Activation::new().w_recency(1.0).half_life(3600.0);
        let before = mem.store.get_meta(&mem.ids).unwrap();
        let opts = SearchOptions::new()
            .activation(a)
            .now(NOW + 10.0)
            .touch(true);
        let hits = mem.store.search_with(&q, 4, &opts).unwrap();
        let touched: Vec<u64> = hits.iter().flatten().map(|h| h.id).collect();
        let after = mem.store.get_meta(&mem.ids).unwrap();
        for (j, id) in mem.ids.iter().enumerate() {
            let want = if touched.contains(id) {
                NOW + 10.0
            } else {
                before.times[j]
            };
            assert_eq!(after.times[j], want, "{}: id {id}", u.name);
        }
        assert_eq!(after.importance, before.importance);
        assert_eq!(after.biases, before.biases);
        // Without `now` the library reads the clock.
        let clock = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        let t0 = clock();
        let opts = SearchOptions::new().activation(a).touch(true);
        let hits = mem.store.search_with(&q[..9], 2, &opts).unwrap();
        let t1 = clock();
        let ids: AlignedVec<u64> = hits[0].iter().map(|h| h.id).collect();
        for t in mem.store.get_meta(&ids).unwrap().times.iter() {
            assert!(
                *t >= t0 - 1.0 && *t <= t1 + 1.0,
                "{}: {t0} {t} {t1}",
                u.name
            );
        }
        // A search without touch changes nothing.
        let snapshot = mem.store.get_meta(&mem.ids).unwrap();
        let opts = SearchOptions::new().activation(a).now(NOW + 99.0);
        mem.store.search_with(&q, 5, &opts).unwrap();
        assert_eq!(mem.store.get_meta(&mem.ids).unwrap(), snapshot);
    }
}

#[test]
fn metadata_calls() {
    let store = Store::<f32>::new(&backends::cpu(), 2, Metric::Cosine).unwrap();
    let v = AlignedVec::from_slice(&[1.0, 0.0, 0.0, 1.0, 0.6, 0.8]);
    let ids = AlignedVec::from_slice(&[1u64, 2, 3]);
    store
        .add_memories(
            &ids,
            &v,
            Some(&AlignedVec::from_slice(&[10.5, 2e9, -3.25])),
            Some(&AlignedVec::from_slice(&[1.0, 2.0, 3.0])),
        )
        .unwrap();
    let meta = store
        .get_meta(&AlignedVec::from_slice(&[3u64, 1, 2]))
        .unwrap();
    assert_eq!(meta.times.as_slice(), &[-3.25, 10.5, 2e9]);
    assert_eq!(meta.importance.as_slice(), &[3.0, 1.0, 2.0]);
    assert_eq!(meta.biases.as_slice(), &[0.0; 3]);
    // Without times an upsert keeps them and a new memory gets 0.
    let pair = AlignedVec::from_slice(&[1u64, 4]);
    store.add(&pair, &v[..4]).unwrap();
    assert_eq!(
        store.get_meta(&pair).unwrap().times.as_slice(),
        &[10.5, 0.0]
    );
    store
        .add_memories(
            &pair,
            &v[..4],
            None,
            Some(&AlignedVec::from_slice(&[7.5, 8.5])),
        )
        .unwrap();
    let meta = store.get_meta(&pair).unwrap();
    assert_eq!(meta.times.as_slice(), &[10.5, 0.0]);
    assert_eq!(meta.importance.as_slice(), &[7.5, 8.5]);
    // A repeated id takes its last entry; f64 precision is kept.
    let twice = AlignedVec::from_slice(&[3u64, 3]);
    let t = 1_700_000_000.000_001;
    store
        .set_times(&twice, &AlignedVec::from_slice(&[5.0, t]))
        .unwrap();
    store
        .set_importance(&twice, &AlignedVec::from_slice(&[1.0, -1.5]))
        .unwrap();
    store
        .set_bias(
            &AlignedVec::from_slice(&[3u64]),
            &AlignedVec::from_slice(&[0.75]),
        )
        .unwrap();
    let meta = store.get_meta(&AlignedVec::from_slice(&[3u64])).unwrap();
    assert_eq!(
        (meta.times[0], meta.importance[0], meta.biases[0]),
        (t, -1.5, 0.75)
    );
    assert!(store.get_meta(&[]).unwrap().times.is_empty());
}

#[test]
fn bad_input_is_refused() {
    let store = Store::<f32>::new(&backends::cpu(), 2, Metric::Dot).unwrap();
    let ids = AlignedVec::from_slice(&[1u64, 2]);
    let v = AlignedVec::from_slice(&[1.0, 0.0, 0.0, 1.0]);
    let times = AlignedVec::from_slice(&[1.0, 2.0]);
    let imp = AlignedVec::from_slice(&[0.5f32, 0.5]);
    store
        .add_memories(&ids, &v, Some(&times), Some(&imp))
        .unwrap();
    let new = AlignedVec::from_slice(&[3u64, 4]);
    for bad in [f64::NAN, f64::INFINITY] {
        let e = store
            .add_memories(&new, &v, Some(&AlignedVec::from_slice(&[1.0, bad])), None)
            .unwrap_err();
        assert_eq!(e.status, Status::NonFinite);
        let e = store
            .set_times(&ids, &AlignedVec::from_slice(&[bad, 1.0]))
            .unwrap_err();
        assert_eq!(e.status, Status::NonFinite);
    }
    let e = store
        .add_memories(
            &new,
            &v,
            None,
            Some(&AlignedVec::from_slice(&[f32::NEG_INFINITY, 0.0])),
        )
        .unwrap_err();
    assert_eq!(e.status, Status::NonFinite);
    let e = store
        .set_importance(&ids, &AlignedVec::from_slice(&[f32::NAN, 0.0]))
        .unwrap_err();
    assert_eq!(e.status, Status::NonFinite);
    assert_eq!(store.count().unwrap(), 2, "nothing added");
    let absent = AlignedVec::from_slice(&[1u64, 9]);
    assert_eq!(
        store.set_times(&absent, &times).unwrap_err().status,
        Status::NotFound
    );
    assert_eq!(
        store.get_meta(&absent).unwrap_err().status,
        Status::NotFound
    );
    let meta = store.get_meta(&ids).unwrap();
    assert_eq!(meta.times, times, "refused calls changed nothing");
    assert_eq!(meta.importance, imp);
    // Checked before the library is called.
    let e = store
        .add_memories(&new, &v, Some(&times[..1]), None)
        .unwrap_err();
    assert_eq!(e.status, Status::Shape);
    assert_eq!(
        store.set_importance(&ids, &imp[..1]).unwrap_err().status,
        Status::Shape
    );
    let wide = AlignedVec::from_slice(&[0.0f64, 1.0, 2.0]);
    assert_eq!(
        store.set_times(&ids, &wide[1..]).unwrap_err().status,
        Status::Misaligned
    );
    // Options the library refuses.
    let q = AlignedVec::from_slice(&[1.0f32, 0.5]);
    for a in [
        Activation::new().half_life(0.0),
        Activation::new().half_life(-1.0),
        Activation::new().half_life(f64::NAN),
        Activation::new().w_recency(f32::INFINITY),
        Activation::new().w_relevance(f32::NAN),
    ] {
        let opts = SearchOptions::new().activation(a).now(NOW);
        let e = store.search_with(&q, 1, &opts).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{a:?}");
    }
    let opts = SearchOptions::new()
        .activation(Activation::new())
        .now(f64::INFINITY);
    assert_eq!(
        store.search_with(&q, 1, &opts).unwrap_err().status,
        Status::InvalidArgument
    );
    // now and touch mean nothing without an activation.
    for opts in [
        SearchOptions::new().touch(true),
        SearchOptions::new().now(NOW),
    ] {
        assert_eq!(
            store.search_with(&q, 1, &opts).unwrap_err().status,
            Status::InvalidArgument
        );
    }
}

#[test]
fn save_and_open_keep_the_metadata() {
    let mut rng = Rng::new(0x5a7e);
    for u in backends::exact() {
        let mem = Memories::<F16>::new(&u.rt, &mut rng, 90, 11, Metric::Cosine);
        let path = std::env::temp_dir().join(format!(
            "mnemo-test-activation-{}-{}.store",
            u.name,
            std::process::id()
        ));
        mem.store.save(&path).unwrap();
        let back = Store::<F16>::open(&u.rt, &path).unwrap();
        assert_eq!(
            back.get_meta(&mem.ids).unwrap(),
            mem.store.get_meta(&mem.ids).unwrap()
        );
        let q = AlignedVec::from_slice(&rng.values(2 * 11));
        let opts = SearchOptions::new()
            .activation(
                Activation::new()
                    .w_recency(1.0)
                    .w_importance(0.1)
                    .half_life(1e4),
            )
            .now(NOW)
            .apply_bias(true);
        assert_eq!(
            back.search_with(&q, 10, &opts).unwrap(),
            mem.store.search_with(&q, 10, &opts).unwrap(),
            "{}",
            u.name
        );
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn durable_store_journals_the_metadata() {
    let rt = backends::cpu();
    let dir = std::env::temp_dir().join(format!("mnemo-activation-durable-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.store");
    let ids: AlignedVec<u64> = (0..6u64).collect();
    let v = AlignedVec::from_slice(&Rng::new(6).values(6 * 4));
    let want = {
        let opts = DurableOptions::new()
            .create(4, Metric::Cosine)
            .sync(SyncPolicy::Os);
        let store = Store::<f32>::open_durable(&rt, &path, &opts).unwrap();
        let imp: AlignedVec<f32> = (0..6).map(|i| i as f32).collect();
        store
            .add_memories(&ids, &v, Some(&AlignedVec::from_elem(100.0, 6)), Some(&imp))
            .unwrap();
        store.checkpoint().unwrap();
        store
            .set_times(&ids[..2], &AlignedVec::from_slice(&[200.0, 300.0]))
            .unwrap();
        store
            .set_importance(
                &AlignedVec::from_slice(&[5u64]),
                &AlignedVec::from_slice(&[9.0]),
            )
            .unwrap();
        let a = Activation::new()
            .w_relevance(0.0)
            .w_recency(1.0)
            .half_life(50.0);
        let opts = SearchOptions::new().activation(a).now(1000.0).touch(true);
        let hits = store.search_with(&v[8..12], 2, &opts).unwrap();
        let mut got: Vec<u64> = hits[0].iter().map(|h| h.id).collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1], "the two most recent");
        let meta = store.get_meta(&ids).unwrap();
        assert_eq!(
            meta.times.as_slice(),
            &[1000.0, 1000.0, 100.0, 100.0, 100.0, 100.0]
        );
        assert!(store.stats().unwrap().journal_records >= 3);
        meta
    };
    let back = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new()).unwrap();
    let meta = back.get_meta(&ids).unwrap();
    assert_eq!(meta, want, "replayed from the journal");
    assert_eq!(meta.importance.as_slice(), &[0.0, 1.0, 2.0, 3.0, 4.0, 9.0]);
    drop(back);
    std::fs::remove_dir_all(&dir).ok();
}
