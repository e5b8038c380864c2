//! Memories' fields and filters through the safe API: round trips of every
//! field, None keeping and empty clearing, key conflicts refused without a
//! change, bad input refused before or by the library, filters of every
//! kind on a small hand-made store, the exactness of numbers beyond 2^53,
//! per-query filters, sharing one expression between threads, snapshots
//! and journals keeping the fields.

use std::collections::BTreeMap;

use mnemo::{
    AlignedVec, DurableOptions, Fields, Metric, Runtime, SearchOptions, Status, Store, SyncPolicy,
    Value, Where,
};

fn cpu() -> Runtime {
    Runtime::builder().cpu().build().unwrap()
}

fn ids(v: &[u64]) -> AlignedVec<u64> {
    AlignedVec::from_slice(v)
}

fn ones(n: usize, dim: usize) -> AlignedVec<f32> {
    AlignedVec::from_elem(1.0f32, n * dim)
}

fn fields_of(store: &Store<f32>, id: u64) -> Fields {
    store.read(&[id]).unwrap()[0].clone().unwrap().fields
}

fn selected(store: &Store<f32>, w: &Where) -> Vec<u64> {
    store.select(w, 0, u64::MAX).unwrap().ids
}

/// The library's message names what was wrong.
fn refused(r: mnemo::Result<()>, status: Status, words: &str) {
    let e = r.expect_err("the call should have failed");
    assert_eq!(e.status, status, "{e}");
    assert!(
        e.message.contains(words),
        "message {:?} lacks {words:?}",
        e.message
    );
}

#[test]
fn round_trip_of_every_field() {
    let store = Store::<f32>::new(&cpu(), 2, Metric::Cosine).unwrap();
    let payload: Vec<u8> = vec![0, 159, 146, 150, 255]; // not UTF-8
    let f = Fields::new()
        .key("k\u{e9}y")
        .namespace(["users", "42", "\u{1f600}"])
        .tags(["z", "a", "z", "m"])
        .attr("year", 2021)
        .attr("score", 0.25)
        .attr("ok", true)
        .attr("lang", "en")
        .attr("empty", "")
        .payload(payload.clone());
    store
        .add_with_fields(&ids(&[7]), &ones(1, 2), std::slice::from_ref(&f))
        .unwrap();
    let got = fields_of(&store, 7);
    assert_eq!(got.key.as_deref(), Some("k\u{e9}y"));
    assert_eq!(
        got.namespace,
        Some(vec!["users".into(), "42".into(), "\u{1f600}".into()])
    );
    // Tags come back sorted and unique.
    assert_eq!(got.tags, Some(vec!["a".into(), "m".into(), "z".into()]));
    let want: BTreeMap<String, Value> = [
        ("empty", Value::Str(String::new())),
        ("lang", Value::Str("en".into())),
        ("ok", Value::Bool(true)),
        ("score", Value::Double(0.25)),
        ("year", Value::Int(2021)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(got.attributes, Some(want));
    assert_eq!(got.payload, Some(payload));
    assert_eq!(got.payload_str(), None);

    // Writing back what was read reproduces it.
    store
        .update_fields(&ids(&[7]), std::slice::from_ref(&got))
        .unwrap();
    assert_eq!(fields_of(&store, 7), got);
}

#[test]
fn none_keeps_and_empty_clears() {
    let store = Store::<f32>::new(&cpu(), 1, Metric::Dot).unwrap();
    let full = Fields::new()
        .key("a")
        .namespace(["n"])
        .tags(["t"])
        .attr("x", 1)
        .payload("p");
    store
        .add_with_fields(&ids(&[1]), &ones(1, 1), std::slice::from_ref(&full))
        .unwrap();
    // An upsert with no fields keeps them all, and the vector changes.
    store
        .add_with_fields(
            &ids(&[1]),
            &AlignedVec::from_slice(&[2.0]),
            &[Fields::new()],
        )
        .unwrap();
    assert_eq!(fields_of(&store, 1), full);
    assert_eq!(store.get(1).unwrap()[0], 2.0);
    // A plain add (no fields at all) keeps them too.
    store.add(&ids(&[1]), &ones(1, 1)).unwrap();
    assert_eq!(fields_of(&store, 1), full);
    // Empty values clear, one field at a time.
    let cleared = Fields {
        key: Some(String::new()),
        namespace: Some(vec![]),
        tags: Some(vec![]),
        attributes: Some(BTreeMap::new()),
        payload: Some(vec![]),
    };
    store.update_fields(&ids(&[1]), &[cleared]).unwrap();
    assert_eq!(fields_of(&store, 1), Fields::new());
    assert_eq!(store.ids_of_keys(&["a"]).unwrap(), [None]);
    // A namespace no memory holds any more is not listed.
    assert_eq!(store.namespaces().unwrap(), []);
    // A new memory without fields has none.
    store.add(&ids(&[2]), &ones(1, 1)).unwrap();
    assert_eq!(fields_of(&store, 2), Fields::new());
}

#[test]
fn key_conflicts_change_nothing() {
    let store = Store::<f32>::new(&cpu(), 1, Metric::Dot).unwrap();
    store
        .add_with_fields(
            &ids(&[1, 2]),
            &ones(2, 1),
            &[
                Fields::new().key("one").tags(["x"]),
                Fields::new().key("two"),
            ],
        )
        .unwrap();
    let before = store.read(&[1, 2, 3]).unwrap();

    // A key held by another memory before the call, with a new memory in
    // the same batch: nothing is added.
    refused(
        store.add_with_fields(
            &ids(&[3, 2]),
            &ones(2, 1),
            &[Fields::new().key("three"), Fields::new().key("one")],
        ),
        Status::InvalidArgument,
        "one",
    );
    assert_eq!(store.count().unwrap(), 2);
    // Two memories of one call asking for the same key.
    refused(
        store.add_with_fields(
            &ids(&[3, 4]),
            &ones(2, 1),
            &[Fields::new().key("new"), Fields::new().key("new")],
        ),
        Status::InvalidArgument,
        "new",
    );
    // Through an update.
    refused(
        store.update_fields(&ids(&[1]), &[Fields::new().key("two").tags(["y"])]),
        Status::InvalidArgument,
        "two",
    );
    assert_eq!(store.count().unwrap(), 2);
    assert_eq!(store.read(&[1, 2, 3]).unwrap(), before);
    assert_eq!(
        store.ids_of_keys(&["one", "two", "three", "new"]).unwrap(),
        [Some(1), Some(2), None, None]
    );

    // A memory may write its own key again; a freed key can be taken.
    store
        .add_with_fields(&ids(&[1]), &ones(1, 1), &[Fields::new().key("one")])
        .unwrap();
    store
        .update_fields(&ids(&[2]), &[Fields::new().key("")])
        .unwrap();
    store
        .update_fields(&ids(&[1]), &[Fields::new().key("two")])
        .unwrap();
    assert_eq!(store.ids_of_keys(&["one", "two"]).unwrap(), [None, Some(1)]);
    // Removing a memory frees its key.
    store.remove(&ids(&[1])).unwrap();
    store
        .add_with_fields(&ids(&[5]), &ones(1, 1), &[Fields::new().key("two")])
        .unwrap();
    assert_eq!(store.ids_of_keys(&["two"]).unwrap(), [Some(5)]);
}

#[test]
fn bad_fields_are_refused_without_a_change() {
    let store = Store::<f32>::new(&cpu(), 1, Metric::Dot).unwrap();
    store
        .add_with_fields(&ids(&[1]), &ones(1, 1), &[Fields::new().key("k")])
        .unwrap();
    let before = store.read(&[1]).unwrap();
    let one = |f: Fields| store.add_with_fields(&ids(&[2]), &ones(1, 1), &[f]);
    // Caught before the library: NUL bytes, mismatched lengths.
    refused(
        one(Fields::new().tags(["a\0b"])),
        Status::InvalidArgument,
        "NUL",
    );
    refused(
        one(Fields::new().key("a\0")),
        Status::InvalidArgument,
        "NUL",
    );
    refused(
        store.add_with_fields(&ids(&[2, 3]), &ones(2, 1), &[Fields::new()]),
        Status::Shape,
        "fields",
    );
    // Caught by the library, naming the field.
    refused(
        one(Fields::new().tags([""])),
        Status::InvalidArgument,
        "tag",
    );
    refused(
        one(Fields::new().attr("", 1)),
        Status::InvalidArgument,
        "name",
    );
    refused(
        one(Fields::new().attr("x", f64::NAN)),
        Status::InvalidArgument,
        "DOUBLE",
    );
    refused(
        one(Fields::new().namespace(vec!["p"; 33])),
        Status::InvalidArgument,
        "namespace",
    );
    refused(
        one(Fields::new().key("k".repeat(1025))),
        Status::InvalidArgument,
        "key",
    );
    refused(
        one(Fields::new().attr("s", "v".repeat(1025))),
        Status::InvalidArgument,
        "s",
    );
    refused(
        store.update_fields(&ids(&[9]), &[Fields::new().tags(["a"])]),
        Status::NotFound,
        "",
    );
    assert_eq!(store.count().unwrap(), 1);
    assert_eq!(store.read(&[1]).unwrap(), before);
    // The limits themselves are accepted.
    one(Fields::new()
        .namespace(vec!["p"; 32])
        .key("k".repeat(1024))
        .attr("s", "v".repeat(1024)))
    .unwrap();
    // A key with a NUL byte cannot be held: looked up, it is absent.
    assert_eq!(store.ids_of_keys(&["k\0", "k"]).unwrap(), [None, Some(1)]);
}

/// Six memories, one filter of each kind.
fn small_store(rt: &Runtime) -> Store<f32> {
    let store = Store::<f32>::new(rt, 2, Metric::Cosine).unwrap();
    let f = [
        Fields::new()
            .key("a")
            .namespace(["users", "1"])
            .tags(["news", "en"])
            .attr("year", 2019)
            .attr("lang", "en"),
        Fields::new()
            .key("b")
            .namespace(["users", "1", "episodic"])
            .tags(["news"])
            .attr("year", 2021.0)
            .attr("lang", "de"),
        Fields::new()
            .namespace(["users", "2"])
            .tags(["sports"])
            .attr("year", "2022")
            .attr("ok", true),
        Fields::new()
            .namespace(["users"])
            .attr("year", 2023)
            .attr("ok", false),
        Fields::new().tags(["en"]).attr("lang", "en"),
        Fields::new(),
    ];
    let times = AlignedVec::from_slice(&[10.0, 20.0, 30.0, 40.0, 50.0, 0.0]);
    let imp = AlignedVec::from_slice(&[0.1f32, 0.2, 0.3, 0.4, 0.5, 0.0]);
    let v: AlignedVec<f32> = (0..6)
        .flat_map(|i| {
            let a = i as f32 * 0.3;
            [a.cos(), a.sin()]
        })
        .collect();
    store
        .add_memories_with_fields(&ids(&[1, 2, 3, 4, 5, 6]), &v, Some(&times), Some(&imp), &f)
        .unwrap();
    store
}

#[test]
fn every_kind_of_filter() {
    let store = small_store(&cpu());
    let cases: Vec<(Where, Vec<u64>)> = vec![
        (Where::all(), vec![1, 2, 3, 4, 5, 6]),
        (Where::nothing(), vec![]),
        (Where::namespace(["users", "1"]), vec![1]),
        (Where::namespace_under(["users", "1"]), vec![1, 2]),
        (Where::namespace_under(["users"]), vec![1, 2, 3, 4]),
        (
            Where::namespace_under(Vec::<String>::new()),
            vec![1, 2, 3, 4],
        ),
        (Where::namespace(["users", "3"]), vec![]),
        (Where::tag("news"), vec![1, 2]),
        (Where::tags_any(["sports", "en"]), vec![1, 3, 5]),
        (Where::tags_all(["news", "en"]), vec![1]),
        (
            Where::tags_all(Vec::<String>::new()),
            vec![1, 2, 3, 4, 5, 6],
        ),
        (Where::tags_any(Vec::<String>::new()), vec![]),
        // Numbers compare across INT and DOUBLE; the string "2022" is no number.
        (Where::attr("year").ge(2020), vec![2, 4]),
        (Where::attr("year").eq(2021), vec![2]),
        (Where::attr("year").eq(2019.0), vec![1]),
        (Where::attr("year").lt(2021.5), vec![1, 2]),
        (Where::attr("year").between(2019, 2021), vec![1, 2]),
        (Where::attr("year").eq("2022"), vec![3]),
        (Where::attr("year").ge("2"), vec![3]),
        // NE and NOT_IN need the attribute; NOT does not.
        (Where::attr("year").ne(2019), vec![2, 3, 4]),
        (Where::attr("year").eq(2019).not(), vec![2, 3, 4, 5, 6]),
        (Where::attr("lang").not_in(["de"]), vec![1, 5]),
        (Where::attr("lang").is_in(["de", "fr"]), vec![2]),
        (Where::attr("lang").is_in(Vec::<Value>::new()), vec![]),
        (Where::attr("lang").between("a", "e"), vec![2]),
        (Where::attr("ok").eq(true), vec![3]),
        (Where::attr("ok").ne(true), vec![4]),
        (Where::attr("ok").eq(1), vec![]),
        (Where::attr("ok").exists(), vec![3, 4]),
        (Where::attr("nope").exists(), vec![]),
        (Where::attr("nope").ne(1).not(), vec![1, 2, 3, 4, 5, 6]),
        (Where::key("b"), vec![2]),
        (Where::keys(["a", "b", "zzz"]), vec![1, 2]),
        (Where::ids([6, 2, 99]), vec![2, 6]),
        (Where::time(20.0, 40.0), vec![2, 3, 4]),
        (Where::time(45.0, f64::INFINITY), vec![5]),
        (Where::importance(f64::NEG_INFINITY, 0.15), vec![1, 6]),
        (
            Where::attr("year").ge(2020) & (Where::attr("lang").eq("en") | Where::tag("news")),
            vec![2],
        ),
        (
            Where::namespace_under(["users"]) & !Where::key("a"),
            vec![2, 3, 4],
        ),
    ];
    for (w, want) in &cases {
        assert_eq!(&selected(&store, w), want, "{w:?}");
        // Searching with it returns exactly those (k larger than the store).
        let hits = store
            .search_with(
                &AlignedVec::from_slice(&[1.0, 0.0]),
                10,
                &SearchOptions::new().where_(w),
            )
            .unwrap();
        let mut got: Vec<u64> = hits[0].iter().map(|h| h.id).collect();
        got.sort_unstable();
        assert_eq!(&got, want, "search {w:?}");
    }
}

#[test]
fn numbers_beyond_2_pow_53_compare_exactly() {
    let store = Store::<f32>::new(&cpu(), 1, Metric::Dot).unwrap();
    let big = (1i64 << 53) + 1;
    store
        .add_with_fields(
            &ids(&[1, 2, 3]),
            &ones(3, 1),
            &[
                Fields::new().attr("n", big),
                Fields::new().attr("n", (1i64 << 53) as f64),
                Fields::new().attr("n", i64::MAX),
            ],
        )
        .unwrap();
    // 2^53 + 1 rounds to 2^53 as a double: an exact comparison tells them apart.
    assert_eq!(
        selected(&store, &Where::attr("n").eq((1i64 << 53) as f64)),
        [2]
    );
    assert_eq!(selected(&store, &Where::attr("n").eq(big)), [1]);
    assert_eq!(
        selected(&store, &Where::attr("n").gt((1i64 << 53) as f64)),
        [1, 3]
    );
    // i64::MAX is below 2^63 (the double it rounds to).
    assert_eq!(
        selected(&store, &Where::attr("n").lt(9_223_372_036_854_775_808.0)),
        [1, 2, 3]
    );
    assert_eq!(selected(&store, &Where::attr("n").eq(i64::MAX)), [3]);
}

#[test]
fn bad_filters_are_refused() {
    let store = small_store(&cpu());
    let bad = |w: Where, words: &str| {
        let e = store.select(&w, 0, 10).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{w:?}: {e}");
        assert!(
            e.message.contains(words),
            "{w:?}: {:?} lacks {words:?}",
            e.message
        );
        // And the same for a search.
        let opts = SearchOptions::new().where_(&w);
        let e = store
            .search_with(&AlignedVec::from_slice(&[1.0, 0.0]), 1, &opts)
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{w:?}: {e}");
    };
    bad(Where::attr("ok").lt(true), "boolean");
    bad(Where::attr("x").between(1, "a"), "BETWEEN");
    bad(Where::attr("x").between(true, false), "BETWEEN");
    bad(Where::attr("x").eq(f64::NAN), "NaN");
    bad(Where::attr("").exists(), "empty");
    bad(Where::time(f64::NAN, 1.0), "NaN");
    bad(Where::importance(0.0, f64::NAN), "NaN");
    bad(Where::tag("a\0"), "NUL");
    bad(Where::attr("x").eq("a\0"), "NUL");
    // More than 256 levels.
    let mut deep = Where::tag("news");
    for _ in 0..300 {
        deep = !deep;
    }
    bad(deep, "256");
}

#[test]
fn per_query_filters() {
    let store = small_store(&cpu());
    let q = AlignedVec::from_slice(&[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    let each = [Some(Where::tag("news")), None, Some(Where::nothing())];
    let hits = store
        .search_with(&q, 6, &SearchOptions::new().where_each(&each))
        .unwrap();
    let row = |r: usize| {
        let mut v: Vec<u64> = hits[r].iter().map(|h| h.id).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(row(0), [1, 2]);
    assert_eq!(row(1), [1, 2, 3, 4, 5, 6]);
    assert_eq!(row(2), Vec::<u64>::new());
    // A memory must pass `where_` too.
    let both = Where::namespace_under(["users", "1"]).not();
    let hits = store
        .search_with(&q, 6, &SearchOptions::new().where_(&both).where_each(&each))
        .unwrap();
    assert_eq!(hits[0].len(), 0);
    assert_eq!(hits[1].len(), 4);
    // One entry per query, or a shape error before the library is called.
    let e = store
        .search_with(&q, 1, &SearchOptions::new().where_each(&each[..2]))
        .unwrap_err();
    assert_eq!(e.status, Status::Shape);
}

#[test]
fn one_expression_shared_by_threads() {
    let store = small_store(&cpu());
    let w = Where::namespace_under(["users"]) & Where::attr("year").exists();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    let opts = SearchOptions::new().where_(&w);
                    let hits = store
                        .search_with(&AlignedVec::from_slice(&[1.0, 0.0]), 10, &opts)
                        .unwrap();
                    assert_eq!(hits[0].len(), 4);
                    assert_eq!(store.select(&w, 0, 10).unwrap().total, 4);
                }
            });
        }
    });
    // The clone is equal and works on its own.
    let c = w.clone();
    assert_eq!(c, w);
    assert_eq!(selected(&store, &c), [1, 2, 3, 4]);
}

#[test]
fn select_pages() {
    let store = small_store(&cpu());
    let w = Where::all();
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = store.select(&w, offset, 4).unwrap();
        assert_eq!(page.total, 6);
        if page.ids.is_empty() {
            break;
        }
        offset += page.ids.len() as u64;
        seen.extend(page.ids);
    }
    assert_eq!(seen, [1, 2, 3, 4, 5, 6]);
    assert_eq!(store.select(&w, 100, 4).unwrap().ids, Vec::<u64>::new());
    assert_eq!(store.select(&w, 0, 0).unwrap().ids, Vec::<u64>::new());
}

#[test]
fn namespaces_count_memories() {
    let store = small_store(&cpu());
    let mut ns: Vec<(String, u64)> = store
        .namespaces()
        .unwrap()
        .into_iter()
        .map(|n| (n.path.join("/"), n.memories))
        .collect();
    ns.sort();
    assert_eq!(
        ns,
        [
            ("users".to_string(), 1),
            ("users/1".to_string(), 1),
            ("users/1/episodic".to_string(), 1),
            ("users/2".to_string(), 1)
        ]
    );
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mnemo-fields-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn snapshots_and_journals_keep_fields() {
    let rt = cpu();
    let dir = temp_dir("persist");
    let all = [1u64, 2, 3, 4, 5, 6];

    let store = small_store(&rt);
    let path = dir.join("saved.store");
    store.save(&path).unwrap();
    let back = Store::<f32>::open(&rt, &path).unwrap();
    assert_eq!(back.read(&all).unwrap(), store.read(&all).unwrap());
    let w = Where::attr("year").ge(2020) | Where::tag("en");
    assert_eq!(selected(&back, &w), selected(&store, &w));

    let durable = dir.join("durable.store");
    let opts = DurableOptions::new()
        .create(2, Metric::Cosine)
        .sync(SyncPolicy::Os);
    let want = {
        let d = Store::<f32>::open_durable(&rt, &durable, &opts).unwrap();
        d.add_with_fields(
            &ids(&[1, 2]),
            &ones(2, 2),
            &[
                Fields::new().key("x").tags(["t"]),
                Fields::new().attr("n", 5),
            ],
        )
        .unwrap();
        d.checkpoint().unwrap();
        // After the snapshot: only in the journal.
        d.update_fields(&ids(&[2]), &[Fields::new().key("y").payload("p")])
            .unwrap();
        d.update_fields(&ids(&[1]), &[Fields::new().key("")])
            .unwrap();
        d.read(&[1, 2]).unwrap()
    };
    let d = Store::<f32>::open_durable(&rt, &durable, &DurableOptions::new()).unwrap();
    assert_eq!(d.read(&[1, 2]).unwrap(), want);
    assert_eq!(d.ids_of_keys(&["x", "y"]).unwrap(), [None, Some(2)]);
    drop(d);
    std::fs::remove_dir_all(&dir).ok();
}
