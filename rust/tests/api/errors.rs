//! Failures: the status, a message naming the argument, and outputs and
//! stores left untouched.

use mnemo::{
    sys, AlignedVec, Error, Filter, LayerNormParams, Metric, ResampleLengths, ResampleShape,
    Runtime, SearchOptions, Status, Store,
};

use crate::common::backends;

fn cpu() -> Runtime {
    backends::cpu()
}

fn store_with(rt: &Runtime, dim: usize, n: usize) -> Store<f32> {
    let store = Store::<f32>::new(rt, dim, Metric::Dot).unwrap();
    let ids: AlignedVec<u64> = (0..n as u64).collect();
    let data: AlignedVec<f32> = (0..n * dim).map(|i| (i % 7) as f32 + 1.0).collect();
    store.add(&ids, &data).unwrap();
    store
}

#[test]
fn status_codes_and_names_match_the_library() {
    assert_eq!(mnemo::status_name(0), "MNEMO_OK");
    for code in 1..=17 {
        let status = Status::from_code(code);
        assert!(!matches!(status, Status::Unknown(_)), "code {code}");
        assert_eq!(status.code(), code);
        assert_eq!(status.name(), mnemo::status_name(code), "code {code}");
    }
    assert_eq!(Status::from_code(18), Status::Unknown(18));
    assert_eq!(mnemo::status_name(18), "MNEMO_E_UNKNOWN");
}

#[test]
fn errors_display_and_chain() {
    let e = Error::new(Status::NotSorted, "src_times row 2 index 5");
    assert_eq!(e.to_string(), "MNEMO_E_NOT_SORTED: src_times row 2 index 5");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    assert!(boxed.to_string().contains("row 2"));
}

#[test]
fn k_zero_is_invalid_and_writes_nothing() {
    let rt = cpu();
    let store = store_with(&rt, 4, 10);
    let q = AlignedVec::from_elem(1.0f32, 4);
    let mut ids = AlignedVec::from_elem(77u64, 0);
    let mut scores = AlignedVec::from_elem(7.0f32, 0);
    let e = store
        .search_into(&q, 0, &SearchOptions::new(), &mut ids, &mut scores)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    assert!(!e.message.is_empty());
    assert!(store.search(&q, 0).is_err());
    // Any k >= 1 is accepted; a huge one does not mean a huge buffer.
    let hits = store.search(&q, usize::MAX).unwrap();
    assert_eq!(hits[0].len(), 10);
}

#[test]
fn non_finite_query_is_refused_and_outputs_untouched() {
    let rt = cpu();
    let store = store_with(&rt, 3, 5);
    let mut q = AlignedVec::from_elem(1.0f32, 6);
    q[4] = f32::NAN;
    let mut ids = AlignedVec::from_elem(77u64, 4);
    let mut scores = AlignedVec::from_elem(7.0f32, 4);
    let e = store
        .search_into(&q, 2, &SearchOptions::new(), &mut ids, &mut scores)
        .unwrap_err();
    assert_eq!(e.status, Status::NonFinite, "{e}");
    assert!(ids.iter().all(|&i| i == 77) && scores.iter().all(|&s| s == 7.0));

    let t = AlignedVec::from_slice(&[1.0f32, f32::INFINITY, 0.0]);
    let e = rt.similarity(Metric::Cosine, &q[..3], &t, 3).unwrap_err();
    assert_eq!(e.status, Status::NonFinite, "{e}");
}

#[test]
fn without_validation_nan_scores_are_never_returned() {
    let rt = Runtime::builder().cpu().validate(false).build().unwrap();
    let store = Store::<f32>::new(&rt, 2, Metric::Dot).unwrap();
    let ids = AlignedVec::from_slice(&[1u64, 2, 3]);
    let data = AlignedVec::from_slice(&[1.0f32, 0.0, f32::NAN, 1.0, 0.5, 0.5]);
    store.add(&ids, &data).unwrap();
    let hits = store
        .search(&AlignedVec::from_slice(&[1.0f32, 1.0]), 3)
        .unwrap();
    assert!(hits[0].iter().all(|h| !h.score.is_nan()), "{hits:?}");
    assert!(hits[0].iter().all(|h| h.id != 2), "{hits:?}");
    assert_eq!(hits[0].len(), 2);
}

#[test]
fn pair_index_out_of_range_names_the_pair_and_writes_nothing() {
    let rt = cpu();
    let table = AlignedVec::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
    let src = AlignedVec::from_slice(&[0u32, 1, 0, 1]);
    let tgt = AlignedVec::from_slice(&[1u32, 0, 2, 0]);
    let mut out = AlignedVec::from_elem(7.0f32, 4);
    let e = rt
        .score_pairs_into(Metric::Dot, &table, 2, &src, &tgt, &mut out)
        .unwrap_err();
    assert_eq!(e.status, Status::OutOfRange, "{e}");
    assert!(e.message.contains('2'), "names pair 2: {e}");
    assert!(out.iter().all(|&s| s == 7.0));
}

#[test]
fn decreasing_times_are_not_sorted() {
    let rt = cpu();
    let data = AlignedVec::from_elem(1.0f32, 6);
    let src = AlignedVec::from_slice(&[0.0f32, 1.0, 2.0, 0.0, 2.0, 1.0]);
    let tgt = AlignedVec::from_slice(&[0.5f32, 0.5]);
    let shape = ResampleShape {
        batch: 2,
        n_src: 3,
        n_tgt: 1,
        dim: 1,
    };
    let mut out = AlignedVec::from_elem(7.0f32, 2);
    let e = rt
        .resample_into(
            shape,
            &data,
            &src,
            &tgt,
            &ResampleLengths::default(),
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.status, Status::NotSorted, "{e}");
    assert!(
        e.message.contains('1') && e.message.contains('2'),
        "names row 1, index 2: {e}"
    );
    assert!(out.iter().all(|&s| s == 7.0));
}

#[test]
fn resample_argument_errors() {
    let rt = cpu();
    let none = AlignedVec::<f32>::new();
    let shape = ResampleShape {
        batch: 1,
        n_src: 0,
        n_tgt: 0,
        dim: 1,
    };
    let e = rt
        .resample(shape, &none, &none, &none, &ResampleLengths::default())
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "n_src = 0: {e}");

    let data = AlignedVec::from_elem(1.0f32, 2);
    let t = AlignedVec::from_slice(&[0.0f32, 1.0]);
    let at = AlignedVec::from_slice(&[0.5f32]);
    let shape = ResampleShape {
        batch: 1,
        n_src: 2,
        n_tgt: 1,
        dim: 1,
    };
    for bad in [0u64, 3] {
        let src_len = AlignedVec::from_slice(&[bad]);
        let lens = ResampleLengths {
            src: Some(&src_len),
            tgt: None,
        };
        let e = rt.resample(shape, &data, &t, &at, &lens).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "src length {bad}: {e}");
    }
    let tgt_len = AlignedVec::from_slice(&[2u64]);
    let lens = ResampleLengths {
        src: None,
        tgt: Some(&tgt_len),
    };
    let e = rt.resample(shape, &data, &t, &at, &lens).unwrap_err();
    assert_eq!(
        e.status,
        Status::InvalidArgument,
        "tgt length past n_tgt: {e}"
    );
}

#[test]
fn layer_norm_eps_must_be_finite_and_not_negative() {
    let rt = cpu();
    let x = AlignedVec::from_slice(&[1.0f32, 2.0]);
    for eps in [-1e-5f32, f32::NAN, f32::INFINITY] {
        let p = LayerNormParams {
            eps,
            ..Default::default()
        };
        let e = rt.layer_norm(&x, 2, &p).unwrap_err();
        assert!(
            matches!(e.status, Status::InvalidArgument | Status::NonFinite),
            "eps {eps}: {e}"
        );
    }
    let gamma = AlignedVec::from_slice(&[1.0f32, f32::NAN]);
    let p = LayerNormParams {
        gamma: Some(&gamma),
        ..Default::default()
    };
    assert_eq!(
        rt.layer_norm(&x, 2, &p).unwrap_err().status,
        Status::NonFinite
    );
}

#[test]
fn store_argument_errors_leave_the_store_unchanged() {
    let rt = cpu();
    for dim in [0usize, 65537] {
        let e = Store::<f32>::new(&rt, dim, Metric::Cosine).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "dim {dim}: {e}");
    }
    let store = store_with(&rt, 2, 3);
    let ids = AlignedVec::from_slice(&[10u64, mnemo::NO_ID]);
    let e = store
        .add(&ids, &AlignedVec::from_elem(1.0f32, 4))
        .unwrap_err();
    assert_eq!(e.status, Status::OutOfRange, "{e}");
    assert!(e.message.contains('1'), "names position 1: {e}");
    assert_eq!(store.count().unwrap(), 3);
    assert_eq!(store.get(10).unwrap_err().status, Status::NotFound);

    let mut bad = AlignedVec::from_elem(1.0f32, 4);
    bad[3] = f32::INFINITY;
    let e = store
        .add(&AlignedVec::from_slice(&[10u64, 11]), &bad)
        .unwrap_err();
    assert_eq!(e.status, Status::NonFinite, "{e}");
    assert_eq!(store.count().unwrap(), 3);

    // Bias: one unknown id and nothing changes.
    let e = store
        .set_bias(
            &AlignedVec::from_slice(&[0u64, 99]),
            &AlignedVec::from_slice(&[5.0f32, 5.0]),
        )
        .unwrap_err();
    assert_eq!(e.status, Status::NotFound, "{e}");
    let opts = SearchOptions::new().apply_bias(true);
    let q = AlignedVec::from_slice(&[1.0f32, 0.0]);
    let plain = store.search(&q, 3).unwrap();
    assert_eq!(store.search_with(&q, 3, &opts).unwrap(), plain);
    assert_eq!(store.slot_of(99).unwrap_err().status, Status::NotFound);
}

#[test]
fn bitmap_of_the_wrong_length_is_a_shape_error() {
    let rt = cpu();
    let store = store_with(&rt, 2, 70);
    let words = AlignedVec::from_elem(u64::MAX, 1);
    let opts = SearchOptions::new().filter(Filter::SlotBitmap {
        words: &words,
        slot_count: 64,
    });
    let e = store
        .search_with(&AlignedVec::from_elem(1.0f32, 2), 1, &opts)
        .unwrap_err();
    assert_eq!(e.status, Status::Shape, "{e}");
    // Fewer words than the count needs is caught before the library reads.
    let opts = SearchOptions::new().filter(Filter::SlotBitmap {
        words: &words,
        slot_count: 70,
    });
    let e = store
        .search_with(&AlignedVec::from_elem(1.0f32, 2), 1, &opts)
        .unwrap_err();
    assert_eq!(e.status, Status::Shape, "{e}");
}

#[test]
fn slice_lengths_are_checked_before_the_call() {
    let rt = cpu();
    let v = AlignedVec::from_elem(1.0f32, 6);
    let e = rt.similarity(Metric::Dot, &v, &v, 4).unwrap_err();
    assert_eq!(e.status, Status::Shape);
    let e = rt.similarity(Metric::Dot, &v, &v, 0).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let mut short = AlignedVec::from_elem(0.0f32, 8);
    let e = rt
        .similarity_into(Metric::Dot, &v, &v, 3, &mut short)
        .unwrap_err();
    assert_eq!(e.status, Status::Shape);
    let idx = AlignedVec::from_slice(&[0u32, 1]);
    let e = rt
        .score_pairs(Metric::Dot, &v, 3, &idx, &idx[..1])
        .unwrap_err();
    assert_eq!(e.status, Status::Shape);
    let store = store_with(&rt, 3, 1);
    let e = store.add(&AlignedVec::from_slice(&[5u64]), &v).unwrap_err();
    assert_eq!(e.status, Status::Shape);
    let gamma = AlignedVec::from_elem(1.0f32, 2);
    let p = LayerNormParams {
        gamma: Some(&gamma),
        ..Default::default()
    };
    assert_eq!(rt.layer_norm(&v, 3, &p).unwrap_err().status, Status::Shape);
}

/// Arguments the safe API cannot express, through the raw declarations.
#[test]
fn raw_calls_refuse_unknown_enums_and_short_structs() {
    use std::ptr::{null, null_mut};
    let q = AlignedVec::from_elem(1.0f32, 4);
    let mut out = AlignedVec::from_elem(0.0f32, 1);
    let o = out.as_mut_ptr();
    // SAFETY: every pointer passed is valid, aligned (except where the test
    // is about alignment, which the library checks before reading) and sized
    // for the counts given; the raw runtime is destroyed last.
    unsafe {
        let mut rt = null_mut();
        assert_eq!(
            sys::mnemo_runtime_create(null(), &mut rt),
            0,
            "NULL options = defaults"
        );
        let sim = |metric: i32, queries: *const f32, dtype: i32, dim: u64| {
            sys::mnemo_similarity(rt, metric, queries, 1, q.as_ptr().cast(), dtype, 1, dim, o)
        };
        assert_eq!(
            sim(99, q.as_ptr(), 1, 4),
            sys::MNEMO_E_INVALID_ARGUMENT as i32
        );
        assert_eq!(sim(1, q.as_ptr(), 42, 4), sys::MNEMO_E_DTYPE as i32);
        assert_eq!(
            sim(1, q.as_ptr(), 4, 4),
            sys::MNEMO_E_DTYPE as i32,
            "f64 targets"
        );
        assert_eq!(
            sim(1, q.as_ptr().add(1), 1, 3),
            sys::MNEMO_E_MISALIGNED as i32
        );
        assert_eq!(sim(1, null(), 1, 4), sys::MNEMO_E_NULL_POINTER as i32);
        assert_eq!(
            sim(1, q.as_ptr(), 1, 0),
            sys::MNEMO_E_INVALID_ARGUMENT as i32
        );
        assert_eq!(sim(1, q.as_ptr(), 1, 4), 0);
        sys::mnemo_runtime_destroy(rt);

        let mut h = null_mut();
        for tweak in [
            (|o: &mut sys::mnemo_runtime_options| o.backend = 7) as fn(&mut _),
            |o| o.precision = 5,
            |o| o.validate = 2,
            |o| o.struct_size = 4,
        ] {
            let mut opts = sys::mnemo_runtime_options_default();
            tweak(&mut opts);
            assert_eq!(
                sys::mnemo_runtime_create(&opts, &mut h),
                sys::MNEMO_E_INVALID_ARGUMENT as i32
            );
            assert!(h.is_null(), "nothing returned on error");
        }
        let opts = sys::mnemo_runtime_options_default();
        assert_eq!(
            opts.struct_size as usize,
            std::mem::size_of::<sys::mnemo_runtime_options>()
        );
        assert_eq!(opts.validate, 1);

        sys::mnemo_runtime_destroy(null_mut());
        sys::mnemo_store_destroy(null_mut());
        sys::mnemo_free(null_mut());
        let mut mem = null_mut();
        assert_eq!(
            sys::mnemo_alloc(0, &mut mem),
            sys::MNEMO_E_INVALID_ARGUMENT as i32
        );
        assert_eq!(sys::mnemo_alloc(20, &mut mem), 0);
        assert_eq!(mem as usize % 16, 0);
        sys::mnemo_free(mem);
    }
}
