//! Durable stores: writes survive a reopen, checkpoint empties the journal,
//! stats report it, a damaged journal is refused with CORRUPT.

use mnemo::{AlignedVec, DurableOptions, Metric, Runtime, Status, Store, SyncPolicy};

use crate::common::prng::Rng;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mnemo-durable-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cpu() -> Runtime {
    Runtime::builder().cpu().build().unwrap()
}

#[test]
fn reopen_after_writes() {
    let rt = cpu();
    let dir = temp_dir("reopen");
    let path = dir.join("m.store");
    let mut rng = Rng::new(0xd0_7ab1e);
    let (n, dim) = (40usize, 19usize);
    let vectors = AlignedVec::from_slice(&rng.values(n * dim));
    let ids: AlignedVec<u64> = (0..n as u64).map(|i| i * 7 + 1).collect();
    let opts = DurableOptions::new()
        .create(dim, Metric::L2Sq)
        .sync(SyncPolicy::Os);
    {
        let store = Store::<f32>::open_durable(&rt, &path, &opts).unwrap();
        store.add(&ids, &vectors).unwrap();
        assert_eq!(
            store
                .remove(&AlignedVec::from_slice(&[8u64, 15, 9999]))
                .unwrap(),
            2
        );
        store
            .set_bias(
                &AlignedVec::from_slice(&[22u64]),
                &AlignedVec::from_slice(&[0.5f32]),
            )
            .unwrap();
        let stats = store.stats().unwrap();
        assert!(stats.durable);
        assert_eq!(
            (stats.vectors, stats.journal_records, stats.sequence),
            (38, 3, 3)
        );
        assert!(stats.journal_bytes > 0);
    }
    let back = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new()).unwrap();
    assert_eq!(back.count().unwrap(), 38);
    assert_eq!(back.metric(), Metric::L2Sq);
    assert_eq!(
        back.get(1 + 7 * 5).unwrap().as_slice(),
        &vectors[5 * dim..6 * dim]
    );
    assert_eq!(back.get(8).unwrap_err().status, Status::NotFound);
    back.checkpoint().unwrap();
    let stats = back.stats().unwrap();
    assert_eq!((stats.vectors, stats.journal_records), (38, 0));
    back.add(
        &AlignedVec::from_slice(&[3u64]),
        &AlignedVec::from_slice(&vectors[..dim]),
    )
    .unwrap();
    drop(back);
    let again = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new()).unwrap();
    assert_eq!(again.count().unwrap(), 39);
    assert_eq!(again.get(3).unwrap().as_slice(), &vectors[..dim]);
    drop(again);
    // The wrong element type is refused after opening.
    let err = Store::<mnemo::F16>::open_durable(&rt, &path, &DurableOptions::new()).unwrap_err();
    assert_eq!(err.status, Status::Dtype);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn missing_store_and_shape_mismatch() {
    let rt = cpu();
    let dir = temp_dir("missing");
    let err = Store::<f32>::open_durable(&rt, dir.join("absent.store"), &DurableOptions::new())
        .unwrap_err();
    assert_eq!(err.status, Status::Io);
    let path = dir.join("s.store");
    drop(
        Store::<f32>::open_durable(&rt, &path, &DurableOptions::new().create(4, Metric::Dot))
            .unwrap(),
    );
    let err = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new().create(5, Metric::Dot))
        .unwrap_err();
    assert_eq!(err.status, Status::Shape);
    let err = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new().create(0, Metric::Dot))
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    let plain = Store::<f32>::new(&rt, 4, Metric::Dot).unwrap();
    assert!(!plain.stats().unwrap().durable);
    assert_eq!(plain.checkpoint().unwrap_err().status, Status::Unsupported);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn corrupt_journal_is_refused() {
    let rt = cpu();
    let dir = temp_dir("corrupt");
    let path = dir.join("c.store");
    let journal = dir.join("c.journal");
    let opts = DurableOptions::new()
        .create(8, Metric::Cosine)
        .sync(SyncPolicy::Os)
        .journal_path(&journal);
    let mut rng = Rng::new(77);
    {
        let store = Store::<f32>::open_durable(&rt, &path, &opts).unwrap();
        for i in 0..4u64 {
            store
                .add(
                    &AlignedVec::from_slice(&[i]),
                    &AlignedVec::from_slice(&rng.values(8)),
                )
                .unwrap();
        }
    }
    let mut bytes = std::fs::read(&journal).unwrap();
    assert!(bytes.len() > 64);
    let at = bytes.len() / 3; // inside a record that is not the last
    bytes[at] ^= 0x5a;
    std::fs::write(&journal, &bytes).unwrap();
    let err = Store::<f32>::open_durable(&rt, &path, &DurableOptions::new().journal_path(&journal))
        .unwrap_err();
    assert_eq!(err.status, Status::Corrupt, "{err}");
    assert!(!err.message.is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
