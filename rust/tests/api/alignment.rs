//! Every slice handed to the library is checked for 16-byte alignment first,
//! and empty slices are fine everywhere.

use mnemo::{
    AlignedVec, Filter, LayerNormParams, Metric, ResampleLengths, ResampleShape, SearchOptions,
    Status, Store,
};

use crate::common::backends;

/// A view one element into an aligned buffer: 4 bytes off for f32.
fn shifted<T: Copy>(v: &AlignedVec<T>, len: usize) -> &[T] {
    &v[1..1 + len]
}

fn assert_misaligned<T: std::fmt::Debug>(r: mnemo::Result<T>, arg: &str) {
    let e = r.expect_err("a misaligned slice must be refused");
    assert_eq!(e.status, Status::Misaligned, "{e}");
    assert!(e.message.contains(arg), "message names {arg}: {e}");
    assert!(
        e.message.contains("AlignedVec"),
        "message says how to fix it: {e}"
    );
}

#[test]
fn every_operation_checks_alignment() {
    let rt = backends::cpu();
    let buf = AlignedVec::from_elem(0.5f32, 17);
    let ok = AlignedVec::from_elem(0.5f32, 16);
    let bad = shifted(&buf, 16);

    assert_misaligned(rt.similarity(Metric::Dot, bad, &ok, 4), "queries");
    assert_misaligned(rt.similarity(Metric::Dot, &ok, bad, 4), "targets");
    let mut out_buf = AlignedVec::from_elem(7.0f32, 17);
    let e = rt.similarity_into(Metric::Dot, &ok, &ok, 4, &mut out_buf[1..]);
    assert_misaligned(e, "scores");
    assert!(out_buf.iter().all(|&v| v == 7.0), "nothing written");

    let idx_buf = AlignedVec::from_slice(&[0u32, 1, 2, 3, 0]);
    let idx = AlignedVec::from_slice(&[0u32, 1, 2, 3]);
    assert_misaligned(rt.score_pairs(Metric::Dot, bad, 4, &idx, &idx), "table");
    assert_misaligned(
        rt.score_pairs(Metric::Dot, &ok, 4, shifted(&idx_buf, 4), &idx),
        "src",
    );
    assert_misaligned(
        rt.score_pairs(Metric::Dot, &ok, 4, &idx, shifted(&idx_buf, 4)),
        "tgt",
    );

    let shape = ResampleShape {
        batch: 1,
        n_src: 4,
        n_tgt: 4,
        dim: 4,
    };
    let times_buf = AlignedVec::from_slice(&[0.0f32, 0.0, 1.0, 2.0, 3.0]);
    let times = AlignedVec::from_slice(&[0.0f32, 1.0, 2.0, 3.0]);
    let none = ResampleLengths::default();
    assert_misaligned(rt.resample(shape, bad, &times, &times, &none), "data");
    assert_misaligned(
        rt.resample(shape, &ok, shifted(&times_buf, 4), &times, &none),
        "src_times",
    );
    assert_misaligned(
        rt.resample(shape, &ok, &times, shifted(&times_buf, 4), &none),
        "tgt_times",
    );
    let len_buf = AlignedVec::from_slice(&[0u64, 4]);
    let lens = ResampleLengths {
        src: Some(shifted(&len_buf, 1)),
        tgt: None,
    };
    assert_misaligned(
        rt.resample(shape, &ok, &times, &times, &lens),
        "src lengths",
    );

    assert_misaligned(rt.normalize_rows(bad, 4), "in");
    let mut inplace = AlignedVec::from_elem(1.0f32, 17);
    assert_misaligned(rt.normalize_rows_in_place(&mut inplace[1..], 4), "data");
    assert_misaligned(rt.layer_norm(bad, 4, &LayerNormParams::default()), "in");
    let gamma = LayerNormParams {
        gamma: Some(shifted(&buf, 4)),
        ..Default::default()
    };
    assert_misaligned(rt.layer_norm(&ok, 4, &gamma), "gamma");

    let store = Store::<f32>::new(&rt, 4, Metric::Cosine).unwrap();
    let ids_buf = AlignedVec::from_slice(&[0u64, 1, 2, 3, 4]);
    let ids = AlignedVec::from_slice(&[1u64, 2, 3, 4]);
    assert_misaligned(store.add(shifted(&ids_buf, 4), &ok), "ids");
    assert_misaligned(store.add(&ids, bad), "vectors");
    store.add(&ids, &ok).unwrap();
    assert_misaligned(store.remove(shifted(&ids_buf, 4)), "ids");
    assert_misaligned(store.set_bias(&ids, shifted(&buf, 4)), "biases");
    assert_misaligned(store.search(shifted(&buf, 4), 1), "queries");
    let opts = SearchOptions::new().filter(Filter::Ids(shifted(&ids_buf, 2)));
    assert_misaligned(store.search_with(&ok[..4], 1, &opts), "filter ids");
    let mut get_buf = AlignedVec::from_elem(0.0f32, 5);
    assert_misaligned(store.get_into(1, &mut get_buf[1..]), "out");
    assert_eq!(store.count().unwrap(), 4, "refused calls changed nothing");
}

#[test]
fn empty_slices_are_accepted() {
    let rt = backends::cpu();
    let none_f = AlignedVec::<f32>::new();
    let none_u = AlignedVec::<u64>::new();
    let store = Store::<f32>::new(&rt, 3, Metric::L2Sq).unwrap();
    store.add(&none_u, &none_f).unwrap();
    assert_eq!(store.remove(&none_u).unwrap(), 0);
    store.set_bias(&none_u, &none_f).unwrap();
    assert!(store.search(&none_f, 5).unwrap().is_empty());
    // An empty store answers with empty rows.
    let q = AlignedVec::from_elem(1.0f32, 3);
    assert_eq!(store.search(&q, 2).unwrap(), vec![vec![]]);
    store.add(&AlignedVec::from_slice(&[1u64]), &q).unwrap();
    let opts = SearchOptions::new().filter(Filter::Ids(&none_u));
    assert_eq!(store.search_with(&q, 2, &opts).unwrap(), vec![vec![]]);

    let shape = ResampleShape {
        batch: 0,
        n_src: 2,
        n_tgt: 3,
        dim: 4,
    };
    let out = rt
        .resample(
            shape,
            &none_f,
            &none_f,
            &none_f,
            &ResampleLengths::default(),
        )
        .unwrap();
    assert!(out.is_empty());
    let shape = ResampleShape {
        batch: 2,
        n_src: 1,
        n_tgt: 0,
        dim: 1,
    };
    let two = AlignedVec::from_elem(1.0f32, 2);
    let out = rt
        .resample(shape, &two, &two, &none_f, &ResampleLengths::default())
        .unwrap();
    assert!(out.is_empty());
    assert!(rt.normalize_rows(&none_f, 4).unwrap().is_empty());
    assert!(rt
        .layer_norm(&none_f, 4, &LayerNormParams::default())
        .unwrap()
        .is_empty());
}
