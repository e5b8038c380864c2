//! Sublinear recall: an inverted-file index on clustered data (a Gaussian
//! mixture). nprobe >= nlist gives exactly the exact scan's results, a
//! memory written after the build is found at nprobe = 1 (the hot tier),
//! the info counts follow the writes, the index survives save/open and a
//! durable reopen, and bad options are refused.

use mnemo::{
    AlignedVec, DurableOptions, Filter, Hit, IndexOptions, Metric, Runtime, SearchOptions, Status,
    Store, SyncPolicy,
};

use crate::common::prng::Rng;

const DIM: usize = 24;
const CLUSTERS: usize = 40;
const PER_CLUSTER: usize = 60;
const N: usize = CLUSTERS * PER_CLUSTER;
const NLIST: u32 = 32;
const K: usize = 10;

fn cpu() -> Runtime {
    Runtime::builder().cpu().threads(2).build().unwrap()
}

/// A standard normal sample (Box-Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.unit(); // (0, 1]
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// `CLUSTERS` unit-length centres and `rows` points around them (centre +
/// N(0, sigma^2) per coordinate), as f32 `[rows x DIM]`.
struct Mixture {
    centres: Vec<Vec<f64>>,
    sigma: f64,
}

impl Mixture {
    fn new(rng: &mut Rng, sigma: f64) -> Mixture {
        let centres = (0..CLUSTERS)
            .map(|_| {
                let c: Vec<f64> = (0..DIM).map(|_| normal(rng)).collect();
                let norm = c.iter().map(|x| x * x).sum::<f64>().sqrt();
                c.into_iter().map(|x| x / norm).collect()
            })
            .collect();
        Mixture { centres, sigma }
    }

    /// Point `i` belongs to cluster `i % CLUSTERS`.
    fn points(&self, rng: &mut Rng, rows: usize) -> AlignedVec<f32> {
        let mut out = AlignedVec::with_capacity(rows * DIM);
        for i in 0..rows {
            let c = &self.centres[i % CLUSTERS];
            out.extend(c.iter().map(|&x| (x + self.sigma * normal(rng)) as f32));
        }
        out
    }
}

/// A cosine store of the mixture with ids 1000.. and its index built.
fn indexed_store(rt: &Runtime, seed: u64) -> (Store<f32>, AlignedVec<u64>, Mixture) {
    let mut rng = Rng::new(seed);
    let mix = Mixture::new(&mut rng, 0.08);
    let store = Store::<f32>::new(rt, DIM, Metric::Cosine).unwrap();
    let ids: AlignedVec<u64> = (0..N as u64).map(|i| 1000 + i).collect();
    store.add(&ids, &mix.points(&mut rng, N)).unwrap();
    store
        .build_index(
            &IndexOptions::new()
                .nlist(NLIST)
                .seed(seed)
                .background(false),
        )
        .unwrap();
    (store, ids, mix)
}

fn ids_of(hits: &[Vec<Hit>]) -> Vec<Vec<u64>> {
    hits.iter()
        .map(|row| row.iter().map(|h| h.id).collect())
        .collect()
}

/// Same ids and bit-identical scores, row by row.
fn assert_same(a: &[Vec<Hit>], b: &[Vec<Hit>], what: &str) {
    assert_eq!(ids_of(a), ids_of(b), "{what}: ids");
    for (ra, rb) in a.iter().zip(b) {
        for (ha, hb) in ra.iter().zip(rb) {
            assert_eq!(
                ha.score.to_bits(),
                hb.score.to_bits(),
                "{what}: score of {}",
                ha.id
            );
        }
    }
}

/// Mean fraction of the exact top-k found.
fn recall(exact: &[Vec<Hit>], approx: &[Vec<Hit>]) -> f64 {
    let mut found = 0usize;
    let mut total = 0usize;
    for (e, a) in exact.iter().zip(approx) {
        total += e.len();
        found += e.iter().filter(|h| a.iter().any(|x| x.id == h.id)).count();
    }
    found as f64 / total as f64
}

#[test]
fn index_options_default_is_the_libraries() {
    // SAFETY: plain function returning a struct by value.
    let raw = unsafe { mnemo::sys::mnemo_index_options_default() };
    let d = IndexOptions::default();
    assert_eq!(
        raw.struct_size as usize,
        std::mem::size_of::<mnemo::sys::mnemo_index_options>()
    );
    assert_eq!(
        (raw.nlist, raw.train_iters, raw.train_per_list, raw.seed),
        (d.nlist, d.train_iters, d.train_per_list, d.seed)
    );
    assert_eq!(raw.rebuild_hot_fraction, d.rebuild_hot_fraction);
    assert_eq!(raw.rebuild_hot_min, d.rebuild_hot_min);
    assert_eq!(raw.rebuild_skew, d.rebuild_skew);
    assert_eq!(raw.background != 0, d.background);
    // SAFETY: as above.
    let search = unsafe { mnemo::sys::mnemo_search_options_default() };
    assert_eq!(search.nprobe, 0);
    assert_eq!(SearchOptions::new().nprobe, 0);
}

#[test]
fn full_probe_is_the_exact_scan() {
    let rt = cpu();
    let (store, ids, mix) = indexed_store(&rt, 0x1f_0001);
    let info = store.index_info().unwrap();
    assert_eq!(info.nlist, NLIST);
    assert_eq!(info.indexed, N as u64);
    assert_eq!(info.hot, 0);
    assert!(info.builds >= 1, "{info:?}");
    assert!(!info.rebuilding);
    assert!(info.last_build_seconds >= 0.0 && info.last_build_seconds.is_finite());
    assert!(
        info.largest_list >= (N as u64).div_ceil(NLIST as u64) && info.largest_list <= N as u64,
        "{info:?}"
    );

    let q = mix.points(&mut Rng::new(77), 64);
    let exact = store.search(&q, K).unwrap();
    for nprobe in [NLIST, NLIST + 1, 1000, u32::MAX] {
        let got = store
            .search_with(&q, K, &SearchOptions::new().nprobe(nprobe))
            .unwrap();
        assert_same(&got, &exact, &format!("nprobe {nprobe}"));
    }
    // nprobe = 0 is the exact scan too, on an indexed store.
    assert_same(
        &store
            .search_with(&q, K, &SearchOptions::new().nprobe(0))
            .unwrap(),
        &exact,
        "nprobe 0",
    );

    // Filters and bias are those of the exact scan within the lists read.
    let allowed: AlignedVec<u64> = ids.iter().copied().filter(|id| id % 3 == 0).collect();
    let biased: AlignedVec<u64> = ids.iter().copied().step_by(7).collect();
    let bias: AlignedVec<f32> = (0..biased.len()).map(|i| (i % 5) as f32 * 0.01).collect();
    store.set_bias(&biased, &bias).unwrap();
    let plain = SearchOptions::new()
        .filter(Filter::Ids(&allowed))
        .apply_bias(true);
    let exact_f = store.search_with(&q, K, &plain).unwrap();
    assert!(exact_f.iter().flatten().all(|h| h.id % 3 == 0));
    assert_same(
        &store.search_with(&q, K, &plain.nprobe(NLIST)).unwrap(),
        &exact_f,
        "filter + bias at nprobe = nlist",
    );
    let few = store.search_with(&q, K, &plain.nprobe(2)).unwrap();
    assert!(
        few.iter().flatten().all(|h| h.id % 3 == 0),
        "the filter holds at nprobe 2"
    );

    // On clustered data a few lists already hold most of the exact top-k;
    // more lists never find fewer on average here.
    let r: Vec<f64> = [1u32, 4, 8, 16]
        .iter()
        .map(|&p| {
            let got = store
                .search_with(&q, K, &SearchOptions::new().nprobe(p))
                .unwrap();
            recall(&exact, &got)
        })
        .collect();
    eprintln!("recall@{K} at nprobe 1, 4, 8, 16: {r:?}");
    assert!(r[2] >= 0.8, "recall at nprobe 8: {r:?}");
    assert!(r[3] >= r[0], "{r:?}");
}

#[test]
fn a_new_memory_is_found_at_nprobe_one() {
    let rt = cpu();
    let (store, ids, mix) = indexed_store(&rt, 0x1f_0002);
    let mut rng = Rng::new(5);

    // Away from every cluster: a direction of its own.
    let fresh = mix.points(&mut rng, 1);
    let mut away: Vec<f32> = fresh.iter().map(|&x| -x).collect();
    away[0] += 0.5;
    let away = AlignedVec::from_slice(&away);
    store.add(&AlignedVec::from_slice(&[7u64]), &away).unwrap();
    let one = SearchOptions::new().nprobe(1);
    let hits = store.search_with(&away, 1, &one).unwrap();
    assert_eq!(hits[0][0].id, 7, "the hot tier is always scanned");
    assert!((hits[0][0].score - 1.0).abs() < 1e-5);
    let info = store.index_info().unwrap();
    assert_eq!((info.indexed, info.hot), (N as u64, 1), "{info:?}");

    // An upserted memory leaves its list for the hot tier, and its new
    // vector is what nprobe = 1 finds.
    let target = ids[123];
    store
        .add(
            &AlignedVec::from_slice(&[target]),
            &AlignedVec::from_slice(&away),
        )
        .unwrap();
    let hits = store.search_with(&away, 2, &one).unwrap();
    let mut got = ids_of(&hits)[0].clone();
    got.sort_unstable();
    assert_eq!(got, vec![7, target]);
    let info = store.index_info().unwrap();
    assert_eq!((info.indexed, info.hot), (N as u64 - 1, 2), "{info:?}");

    // A removed memory is tombstoned in its list; the counts are of live ones.
    assert_eq!(
        store.remove(&AlignedVec::from_slice(&[ids[0], 7])).unwrap(),
        2
    );
    let info = store.index_info().unwrap();
    assert_eq!((info.indexed, info.hot), (N as u64 - 2, 1), "{info:?}");
    assert_eq!(store.count().unwrap(), N as u64 - 1);

    // Exact equality at nprobe = nlist still holds with a hot tier.
    let q = mix.points(&mut Rng::new(6), 16);
    assert_same(
        &store
            .search_with(&q, K, &SearchOptions::new().nprobe(NLIST))
            .unwrap(),
        &store.search(&q, K).unwrap(),
        "nprobe = nlist after writes",
    );

    // A rebuild takes the hot tier into the lists.
    store
        .build_index(&IndexOptions::new().nlist(NLIST).background(false))
        .unwrap();
    store.wait_index().unwrap();
    let info = store.index_info().unwrap();
    assert_eq!(
        (info.nlist, info.indexed, info.hot),
        (NLIST, N as u64 - 1, 0),
        "{info:?}"
    );
    assert!(info.builds >= 2, "{info:?}");

    // Without the index every nprobe is the exact scan.
    store.drop_index().unwrap();
    store.drop_index().unwrap(); // no index: OK
    let info = store.index_info().unwrap();
    assert_eq!(info.nlist, 0, "{info:?}");
    assert_same(
        &store.search_with(&q, K, &one).unwrap(),
        &store.search(&q, K).unwrap(),
        "nprobe 1 without an index",
    );
}

#[test]
fn the_index_survives_save_and_durable_reopen() {
    let rt = cpu();
    let (store, _, mix) = indexed_store(&rt, 0x1f_0003);
    let q = mix.points(&mut Rng::new(8), 16);
    let opts = SearchOptions::new().nprobe(3);
    let before = store.search_with(&q, K, &opts).unwrap();

    let dir = std::env::temp_dir().join(format!("mnemo-index-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("saved.store");
    store.save(&path).unwrap();
    let back = Store::<f32>::open(&rt, &path).unwrap();
    let info = back.index_info().unwrap();
    assert_eq!(
        (info.nlist, info.indexed, info.hot),
        (NLIST, N as u64, 0),
        "{info:?}"
    );
    assert_same(
        &back.search_with(&q, K, &opts).unwrap(),
        &before,
        "after save/open",
    );

    // A durable store journals the built layout.
    let dpath = dir.join("durable.store");
    let create = DurableOptions::new()
        .create(DIM, Metric::Cosine)
        .sync(SyncPolicy::Os);
    let mut rng = Rng::new(9);
    let ids: AlignedVec<u64> = (0..N as u64).collect();
    let points = mix.points(&mut rng, N);
    let before = {
        let d = Store::<f32>::open_durable(&rt, &dpath, &create).unwrap();
        d.add(&ids, &points).unwrap();
        d.build_index(&IndexOptions::new().nlist(NLIST).background(false))
            .unwrap();
        d.search_with(&q, K, &opts).unwrap()
    };
    let d = Store::<f32>::open_durable(&rt, &dpath, &DurableOptions::new()).unwrap();
    let info = d.index_info().unwrap();
    assert_eq!((info.nlist, info.indexed), (NLIST, N as u64), "{info:?}");
    assert_same(
        &d.search_with(&q, K, &opts).unwrap(),
        &before,
        "after a durable reopen",
    );
    drop(d);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn small_store_and_bad_options() {
    let rt = cpu();
    let store = Store::<f32>::new(&rt, 3, Metric::L2Sq).unwrap();
    // An empty store's info; building on it is allowed or refused, never a crash.
    assert_eq!(store.index_info().unwrap().nlist, 0);
    let ids = AlignedVec::from_slice(&[1u64, 2, 3]);
    store
        .add(
            &ids,
            &AlignedVec::from_slice(&[0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]),
        )
        .unwrap();
    // Fewer memories than lists: one list per memory.
    store
        .build_index(&IndexOptions::new().nlist(100).background(false))
        .unwrap();
    let info = store.index_info().unwrap();
    assert_eq!(
        (info.nlist, info.indexed, info.largest_list),
        (3, 3, 1),
        "{info:?}"
    );
    let q = AlignedVec::from_slice(&[0.9, 0.1, 0.0]);
    assert_eq!(
        store
            .search_with(&q, 3, &SearchOptions::new().nprobe(1))
            .unwrap()[0][0]
            .id,
        3
    );

    for (what, opts) in [
        ("fraction 0", IndexOptions::new().rebuild_hot_fraction(0.0)),
        (
            "fraction NaN",
            IndexOptions::new().rebuild_hot_fraction(f64::NAN),
        ),
        ("skew -1", IndexOptions::new().rebuild_skew(-1.0)),
        ("skew NaN", IndexOptions::new().rebuild_skew(f64::NAN)),
        ("nlist 2^23", IndexOptions::new().nlist(1 << 23)),
    ] {
        let e = store.build_index(&opts).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{what}: {e}");
    }
    // Infinity means "never rebuild for this reason": accepted.
    store
        .build_index(
            &IndexOptions::new()
                .rebuild_hot_fraction(f64::INFINITY)
                .rebuild_skew(f64::INFINITY),
        )
        .unwrap();
    store.wait_index().unwrap();
}
