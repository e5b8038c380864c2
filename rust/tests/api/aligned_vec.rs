//! AlignedVec keeps its data 16-byte aligned through every operation.

use mnemo::{AlignedVec, Bf16, F16};

fn assert_aligned<T: Copy>(v: &AlignedVec<T>) {
    if !v.is_empty() {
        assert_eq!(v.as_ptr() as usize % 16, 0, "len {}", v.len());
    }
}

#[test]
fn stays_aligned_while_growing() {
    let mut bytes = AlignedVec::<u8>::new();
    let mut halves = AlignedVec::<F16>::new();
    let mut doubles = AlignedVec::<f64>::new();
    for i in 0..1000u32 {
        bytes.push(i as u8);
        halves.push(F16::from_f32(i as f32));
        doubles.push(i as f64);
        assert_aligned(&bytes);
        assert_aligned(&halves);
        assert_aligned(&doubles);
    }
    assert_eq!(bytes.len(), 1000);
    assert_eq!(halves[999].to_f32(), 999.0);
    assert_eq!(doubles.iter().sum::<f64>(), 499500.0);
}

#[test]
fn construction_and_editing() {
    let v: AlignedVec<u64> = (1..=5).collect();
    assert_eq!(&v[..], &[1, 2, 3, 4, 5]);
    let c = v.clone();
    assert_aligned(&c);
    assert_eq!(c, v);
    assert_eq!(format!("{v:?}"), "[1, 2, 3, 4, 5]");

    let mut w = AlignedVec::from(vec![1.5f32, 2.5]);
    w.extend([3.5, 4.5]);
    w.resize(6, 0.0);
    assert_eq!(&w[..], &[1.5, 2.5, 3.5, 4.5, 0.0, 0.0]);
    w.truncate(2);
    w[1] = 9.0;
    assert_eq!(w.to_vec(), vec![1.5, 9.0]);
    w.clear();
    assert!(w.is_empty());
    assert!(w.capacity() >= 6);

    let from_slice: AlignedVec<Bf16> = AlignedVec::from(&[Bf16::from_f32(1.0)][..]);
    assert_aligned(&from_slice);
    assert_eq!(from_slice.iter().count(), 1);
    assert_eq!((&from_slice).into_iter().count(), 1);
    assert!(AlignedVec::<f32>::default().is_empty());
}
