//! `topk_merge`: the merge of per-part search results equals the search of
//! the whole, and padding, ties, duplicates and bad arguments behave as the
//! header says.

use mnemo::{topk_merge, AlignedVec, Metric, Runtime, Status, Store, NO_ID};

use crate::common::prng::Rng;

#[test]
fn merge_of_parts_equals_the_whole_store() {
    let rt = Runtime::builder().cpu().threads(1).build().unwrap();
    let (dim, n, nq, k) = (11usize, 240usize, 3usize, 9usize);
    let mut rng = Rng::new(0x5eed_0016);
    let vectors: Vec<f32> = rng.values(n * dim);
    let queries = AlignedVec::from_slice(&rng.values(nq * dim));
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2Sq] {
        let whole = Store::<f32>::new(&rt, dim, metric).unwrap();
        let ids: Vec<u64> = (0..n as u64).map(|i| 1000 + i).collect();
        whole
            .add(
                &AlignedVec::from_slice(&ids),
                &AlignedVec::from_slice(&vectors),
            )
            .unwrap();
        let parts = 3;
        let mut all_ids = AlignedVec::from_elem(0u64, parts * nq * k);
        let mut all_scores = AlignedVec::from_elem(0.0f32, parts * nq * k);
        for p in 0..parts {
            let part = Store::<f32>::new(&rt, dim, metric).unwrap();
            let mine: Vec<usize> = (p..n).step_by(parts).collect();
            let pid: Vec<u64> = mine.iter().map(|&i| ids[i]).collect();
            let pv: Vec<f32> = mine
                .iter()
                .flat_map(|&i| vectors[i * dim..(i + 1) * dim].to_vec())
                .collect();
            part.add(&AlignedVec::from_slice(&pid), &AlignedVec::from_slice(&pv))
                .unwrap();
            let range = p * nq * k..(p + 1) * nq * k;
            let mut i = AlignedVec::from_elem(0u64, nq * k);
            let mut s = AlignedVec::from_elem(0.0f32, nq * k);
            part.search_into(&queries, k, &Default::default(), &mut i, &mut s)
                .unwrap();
            all_ids[range.clone()].copy_from_slice(&i);
            all_scores[range].copy_from_slice(&s);
        }
        let mut got_ids = AlignedVec::from_elem(0u64, nq * k);
        let mut got_scores = AlignedVec::from_elem(0.0f32, nq * k);
        topk_merge(
            metric,
            parts,
            nq,
            k,
            &all_ids,
            &all_scores,
            &mut got_ids,
            &mut got_scores,
        )
        .unwrap();
        let mut want_ids = AlignedVec::from_elem(0u64, nq * k);
        let mut want_scores = AlignedVec::from_elem(0.0f32, nq * k);
        whole
            .search_into(
                &queries,
                k,
                &Default::default(),
                &mut want_ids,
                &mut want_scores,
            )
            .unwrap();
        assert_eq!(&got_ids[..], &want_ids[..], "{metric:?}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got_scores), bits(&want_scores), "{metric:?}");
    }
}

#[test]
fn padding_ties_duplicates_and_errors() {
    // One query, k = 3, two lists; id 4 in both (best kept), a tie 2 / 9.
    let ids = AlignedVec::from_slice(&[9u64, 4, NO_ID, 4, 2, 8]);
    let scores = AlignedVec::from_slice(&[0.5f32, 0.25, 0.75, 0.125, 0.5, f32::NAN]);
    let mut oi = AlignedVec::from_elem(0u64, 3);
    let mut os = AlignedVec::from_elem(0.0f32, 3);
    topk_merge(Metric::Dot, 2, 1, 3, &ids, &scores, &mut oi, &mut os).unwrap();
    assert_eq!(&oi[..], &[2, 9, 4]);
    assert_eq!(&os[..], &[0.5, 0.5, 0.25]);
    topk_merge(Metric::L2Sq, 2, 1, 3, &ids, &scores, &mut oi, &mut os).unwrap();
    assert_eq!(&oi[..], &[4, 2, 9]);
    assert_eq!(&os[..], &[0.125, 0.5, 0.5]);
    let err = topk_merge(Metric::Dot, 3, 1, 3, &ids, &scores, &mut oi, &mut os).unwrap_err();
    assert_eq!(err.status, Status::Shape);
    let err = topk_merge(Metric::Dot, 2, 1, 0, &ids, &scores, &mut oi, &mut os).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
}
