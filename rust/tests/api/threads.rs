//! Runtimes and stores shared across threads, as mnemo.h allows.

use std::sync::Arc;
use std::thread;

use mnemo::{AlignedVec, Metric, Runtime, Store, F16};

use crate::common::backends;
use crate::common::prng::Rng;

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Runtime>();
    check::<Store<f32>>();
    check::<Store<F16>>();
    check::<AlignedVec<f32>>();
    check::<mnemo::Error>();
}

#[test]
fn concurrent_searches_match_sequential_ones() {
    for u in backends::exact() {
        let dim = 24;
        let mut rng = Rng::new(77);
        let store = Arc::new(Store::<f32>::new(&u.rt, dim, Metric::Cosine).unwrap());
        let ids: AlignedVec<u64> = (0..500).collect();
        store
            .add(&ids, &AlignedVec::from_slice(&rng.values(500 * dim)))
            .unwrap();
        let queries: Vec<AlignedVec<f32>> = (0..4)
            .map(|_| AlignedVec::from_slice(&rng.values(3 * dim)))
            .collect();
        let sequential: Vec<_> = queries
            .iter()
            .map(|q| store.search(q, 7).unwrap())
            .collect();
        let handles: Vec<_> = queries
            .into_iter()
            .map(|q| {
                let store = Arc::clone(&store);
                thread::spawn(move || {
                    (0..20)
                        .map(|_| store.search(&q, 7).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (h, want) in handles.into_iter().zip(sequential) {
            for got in h.join().unwrap() {
                assert_eq!(got, want, "{}", u.name);
            }
        }
    }
}

#[test]
fn writes_from_many_threads_are_serialised() {
    let rt = backends::cpu();
    let dim = 8;
    let store = Arc::new(Store::<f32>::new(&rt, dim, Metric::L2Sq).unwrap());
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let mut rng = Rng::new(t);
                for batch in 0..25u64 {
                    let ids: AlignedVec<u64> = (0..4).map(|i| t * 1000 + batch * 4 + i).collect();
                    store
                        .add(&ids, &AlignedVec::from_slice(&rng.values(4 * dim)))
                        .unwrap();
                    store
                        .set_bias(&ids, &AlignedVec::from_elem(0.1, 4))
                        .unwrap();
                    let q = AlignedVec::from_slice(&rng.values(dim));
                    assert!(!store.search(&q, 3).unwrap()[0].is_empty());
                }
                store.remove(&AlignedVec::from_slice(&[t * 1000])).unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(store.count().unwrap(), 4 * 100 - 4);
}

#[test]
fn one_runtime_serves_many_threads() {
    let rt = backends::cpu();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let rt = rt.clone();
            thread::spawn(move || {
                let v = AlignedVec::from_slice(&Rng::new(t).values(64));
                let s = rt.similarity(Metric::Cosine, &v, &v, 16).unwrap();
                for i in 0..4 {
                    assert!((s[i * 4 + i] - 1.0).abs() < 1e-5);
                }
                // Errors on one thread carry their own message.
                let e = rt.similarity(Metric::Cosine, &v, &v, 0).unwrap_err();
                assert_eq!(e.status, mnemo::Status::InvalidArgument);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
