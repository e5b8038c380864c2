//! Store persistence, slots, upserts and rounding into f16/bf16 storage.

use mnemo::{AlignedVec, Bf16, Metric, Runtime, SearchOptions, Status, Storage, Store, F16};

use crate::common::backends;
use crate::common::prng::Rng;

fn temp_path(name: &str) -> std::path::PathBuf {
    // The system temp folder, so the test binary also runs away from its
    // build tree (on a GPU machine).
    std::env::temp_dir().join(format!("mnemo-test-{name}-{}.store", std::process::id()))
}

fn filled<T: Storage>(
    rt: &Runtime,
    n: usize,
    dim: usize,
    seed: u64,
) -> (Store<T>, AlignedVec<u64>) {
    let mut rng = Rng::new(seed);
    let store = Store::<T>::new(rt, dim, Metric::Cosine).unwrap();
    let ids: AlignedVec<u64> = (0..n).map(|_| rng.next_u64() >> 8).collect();
    store
        .add(&ids, &AlignedVec::from_slice(&rng.values(n * dim)))
        .unwrap();
    let biases: AlignedVec<f32> = (0..n).map(|_| rng.range(-0.2, 0.2) as f32).collect();
    store.set_bias(&ids, &biases).unwrap();
    (store, ids)
}

fn round_trip<T: Storage>(seed: u64) {
    for u in backends::exact() {
        let (store, ids) = filled::<T>(&u.rt, 300, 13, seed);
        store.remove(&ids[..5]).unwrap();
        let path = temp_path(&format!("round-trip-{seed}-{}", u.name));
        store.save(&path).unwrap();
        let back = Store::<T>::open(&u.rt, &path).unwrap();
        assert_eq!(back.dim(), 13);
        assert_eq!(back.metric(), Metric::Cosine);
        assert_eq!(back.count().unwrap(), 295);
        // Slots are not promised to survive a reopen; ids and vectors are.
        for &id in &ids[5..] {
            assert_eq!(back.get(id).unwrap(), store.get(id).unwrap());
            assert!(back.slot_of(id).unwrap() < back.slot_count().unwrap());
        }
        assert_eq!(back.get(ids[0]).unwrap_err().status, Status::NotFound);
        let q = AlignedVec::from_slice(&Rng::new(seed + 1).values(3 * 13));
        let opts = SearchOptions::new().apply_bias(true);
        assert_eq!(
            back.search_with(&q, 20, &opts).unwrap(),
            store.search_with(&q, 20, &opts).unwrap(),
            "{}: same answers after reopening (biases kept)",
            u.name
        );
        // Another element type is refused.
        let e = Store::<F16>::open(&u.rt, &path).err();
        if T::DTYPE != mnemo::DType::F16 {
            assert_eq!(e.expect("dtype mismatch").status, Status::Dtype);
        }
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn save_and_open_f32() {
    round_trip::<f32>(1);
}

#[test]
fn save_and_open_f16() {
    round_trip::<F16>(2);
}

#[test]
fn save_and_open_bf16() {
    round_trip::<Bf16>(3);
}

#[test]
fn damaged_files_are_refused() {
    let rt = backends::cpu();
    let (store, _) = filled::<f32>(&rt, 50, 8, 4);
    let path = temp_path("damaged");
    store.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();

    let missing = temp_path("does-not-exist");
    assert_eq!(
        Store::<f32>::open(&rt, &missing).unwrap_err().status,
        Status::Io
    );

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    std::fs::write(&path, &flipped).unwrap();
    let e = Store::<f32>::open(&rt, &path).unwrap_err();
    assert_eq!(e.status, Status::Corrupt, "{e}");
    assert!(!e.message.is_empty());

    std::fs::write(&path, &good[..good.len() - 9]).unwrap();
    assert_eq!(
        Store::<f32>::open(&rt, &path).unwrap_err().status,
        Status::Corrupt
    );
    std::fs::write(&path, b"definitely not a mnemo store").unwrap();
    assert_eq!(
        Store::<f32>::open(&rt, &path).unwrap_err().status,
        Status::Corrupt
    );
    std::fs::write(&path, b"").unwrap();
    assert_eq!(
        Store::<f32>::open(&rt, &path).unwrap_err().status,
        Status::Corrupt
    );
    std::fs::remove_file(&path).unwrap();

    let e = store
        .save("/nonexistent-dir-for-mnemo/x.store")
        .unwrap_err();
    assert_eq!(e.status, Status::Io, "{e}");
    let e = store.save("bad\0path").unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

#[test]
fn upsert_keeps_slot_and_bias_and_new_ids_append() {
    let rt = backends::cpu();
    let store = Store::<f32>::new(&rt, 2, Metric::Dot).unwrap();
    store
        .add(
            &AlignedVec::from_slice(&[5u64, 6, 7]),
            &AlignedVec::from_slice(&[1.0, 0.0, 2.0, 0.0, 3.0, 0.0]),
        )
        .unwrap();
    let slot6 = store.slot_of(6).unwrap();
    store
        .set_bias(
            &AlignedVec::from_slice(&[6u64]),
            &AlignedVec::from_slice(&[10.0]),
        )
        .unwrap();
    // Upsert 6 and add 8; a repeated id in one call takes the last vector.
    store
        .add(
            &AlignedVec::from_slice(&[6u64, 8, 6]),
            &AlignedVec::from_slice(&[9.0, 9.0, 4.0, 0.0, 0.5, 0.0]),
        )
        .unwrap();
    assert_eq!(store.count().unwrap(), 4);
    assert_eq!(store.slot_of(6).unwrap(), slot6);
    assert_eq!(
        store.slot_of(8).unwrap(),
        3,
        "a new id takes a fresh slot at the end"
    );
    assert_eq!(store.get(6).unwrap().as_slice(), &[0.5, 0.0]);
    let opts = SearchOptions::new().apply_bias(true);
    let hits = store
        .search_with(&AlignedVec::from_slice(&[1.0, 0.0]), 1, &opts)
        .unwrap();
    assert_eq!(
        hits[0],
        vec![mnemo::Hit { id: 6, score: 10.5 }],
        "bias survived the upsert"
    );
}

/// The library rounds f32 input to nearest even exactly as F16/Bf16 do.
#[test]
fn f32_input_is_rounded_to_nearest_even() {
    let rt = backends::cpu();
    let mut values = vec![
        1.0f32 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        2f32.powi(-25) * 3.0,
        1e-6,
        0.1,
        -0.3,
        65504.0,
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
    ];
    values.extend(Rng::new(9).values(1000).iter().map(|v| v * 100.0));
    values.extend(Rng::new(10).values(200).iter().map(|v| v * 1e-5));
    let dim = values.len();
    let data = AlignedVec::from_slice(&values);
    let one = AlignedVec::from_slice(&[1u64]);

    let h = Store::<F16>::new(&rt, dim, Metric::Dot).unwrap();
    h.add(&one, &data).unwrap();
    let got = h.get(1).unwrap();
    for (i, (&v, &g)) in values.iter().zip(got.iter()).enumerate() {
        assert_eq!(
            g.to_bits(),
            F16::from_f32(v).to_f32().to_bits(),
            "f16 [{i}] of {v:e}"
        );
    }
    let b = Store::<Bf16>::new(&rt, dim, Metric::Dot).unwrap();
    b.add(&one, &data).unwrap();
    let got = b.get(1).unwrap();
    for (i, (&v, &g)) in values.iter().zip(got.iter()).enumerate() {
        assert_eq!(
            g.to_bits(),
            Bf16::from_f32(v).to_f32().to_bits(),
            "bf16 [{i}] of {v:e}"
        );
    }
    // Native input is stored as is.
    let native: AlignedVec<F16> = values.iter().map(|&v| F16::from_f32(v)).collect();
    h.add_native(&AlignedVec::from_slice(&[2u64]), &native)
        .unwrap();
    assert_eq!(h.get(2).unwrap(), h.get(1).unwrap());
}

#[test]
fn stores_keep_their_runtime_alive() {
    let store = {
        let rt = Runtime::builder().cpu().build().unwrap();
        Store::<f32>::new(&rt, 2, Metric::Cosine).unwrap()
    };
    store
        .add(
            &AlignedVec::from_slice(&[1u64]),
            &AlignedVec::from_slice(&[1.0, 1.0]),
        )
        .unwrap();
    assert_eq!(
        store.runtime().info().unwrap().backend_active,
        mnemo::Backend::Cpu
    );
    assert!(format!("{store:?}").contains("dim: 2"));
}
