//! Memories' fields and filters against a small reference model of the
//! rules in mnemo.h: random memories (keys, namespaces, tags, attributes of
//! every kind, sometimes of mixed kinds under one name, times, importances)
//! and random expression trees. Selections equal the model's matching ids;
//! a search scoped by an expression returns min(k, matches) results ranked
//! as the float64 reference ranks the matching memories alone (ties to the
//! smaller id, then padding), as does the per-query form; reads give back
//! what the model holds. Upserts that leave fields out, field updates,
//! removals that compact the store and fresh memories keep the two in step.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use mnemo::{AlignedVec, Fields, Filter, Hit, Metric, SearchOptions, Store, Value, Where, NO_ID};

use crate::common::backends::{self, Under};
use crate::common::bounds::{check_top_k, score_tol};
use crate::common::prng::Rng;
use crate::common::reference::{self, norm};

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Mem {
    id: u64,
    vector: Vec<f32>,
    time: f64,
    importance: f32,
    key: Option<String>,
    ns: Option<Vec<String>>,
    tags: BTreeSet<String>,
    attrs: BTreeMap<String, Value>,
    payload: Option<Vec<u8>>,
}

impl Mem {
    fn new(id: u64, vector: Vec<f32>) -> Mem {
        Mem {
            id,
            vector,
            time: 0.0,
            importance: 0.0,
            key: None,
            ns: None,
            tags: BTreeSet::new(),
            attrs: BTreeMap::new(),
            payload: None,
        }
    }

    /// A write: each `Some` replaces its field, an empty value clearing it.
    fn apply(&mut self, f: &Fields) {
        if let Some(k) = &f.key {
            self.key = (!k.is_empty()).then(|| k.clone());
        }
        if let Some(ns) = &f.namespace {
            self.ns = (!ns.is_empty()).then(|| ns.clone());
        }
        if let Some(t) = &f.tags {
            self.tags = t.iter().cloned().collect();
        }
        if let Some(a) = &f.attributes {
            self.attrs = a.clone();
        }
        if let Some(p) = &f.payload {
            self.payload = (!p.is_empty()).then(|| p.clone());
        }
    }

    /// What a read gives back: `Some` for exactly the fields it has.
    fn fields(&self) -> Fields {
        Fields {
            key: self.key.clone(),
            namespace: self.ns.clone(),
            tags: (!self.tags.is_empty()).then(|| self.tags.iter().cloned().collect()),
            attributes: (!self.attrs.is_empty()).then(|| self.attrs.clone()),
            payload: self.payload.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum AOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Between,
    Exists,
}

/// The test's own expression tree: evaluated by the model, and turned into
/// a `Where` through the public builder.
#[derive(Clone, Debug)]
enum Expr {
    Ns {
        under: bool,
        parts: Vec<String>,
    },
    Tags {
        all: bool,
        tags: Vec<String>,
    },
    Attr {
        name: String,
        op: AOp,
        values: Vec<Value>,
    },
    Keys(Vec<String>),
    Ids(Vec<u64>),
    Time(f64, f64),
    Importance(f64, f64),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
}

/// int64 against a double, exactly (no rounding of the integer).
fn cmp_int_double(i: i64, d: f64) -> Ordering {
    if d >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    if d < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    let floor = d.floor();
    // |floor| <= 2^63 and floor < 2^63: the conversion is exact.
    match i.cmp(&(floor as i64)) {
        Ordering::Equal if d > floor => Ordering::Less,
        o => o,
    }
}

/// Ordering of an attribute against an operand: numbers with numbers,
/// strings bytewise with strings, nothing else.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Double(y)) => Some(cmp_int_double(*x, *y)),
        (Value::Double(x), Value::Int(y)) => Some(cmp_int_double(*y, *x).reverse()),
        (Value::Str(x), Value::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x == y,
        _ => order(a, b) == Some(Ordering::Equal),
    }
}

impl Expr {
    fn eval(&self, m: &Mem) -> bool {
        match self {
            Expr::Ns { under, parts } => match &m.ns {
                None => false,
                Some(ns) if *under => ns.starts_with(parts),
                Some(ns) => ns == parts,
            },
            Expr::Tags { all, tags } => {
                if *all {
                    tags.iter().all(|t| m.tags.contains(t))
                } else {
                    tags.iter().any(|t| m.tags.contains(t))
                }
            }
            Expr::Attr { name, op, values } => {
                // A predicate on an attribute the memory lacks is false.
                let Some(v) = m.attrs.get(name) else {
                    return false;
                };
                let ord = |x: &Value| order(v, x);
                use Ordering::*;
                match op {
                    AOp::Exists => true,
                    AOp::Eq => equal(v, &values[0]),
                    AOp::Ne => !equal(v, &values[0]),
                    AOp::Lt => ord(&values[0]) == Some(Less),
                    AOp::Le => matches!(ord(&values[0]), Some(Less | Equal)),
                    AOp::Gt => ord(&values[0]) == Some(Greater),
                    AOp::Ge => matches!(ord(&values[0]), Some(Greater | Equal)),
                    AOp::In => values.iter().any(|x| equal(v, x)),
                    AOp::NotIn => !values.iter().any(|x| equal(v, x)),
                    AOp::Between => {
                        matches!(ord(&values[0]), Some(Greater | Equal))
                            && matches!(ord(&values[1]), Some(Less | Equal))
                    }
                }
            }
            Expr::Keys(keys) => m.key.as_ref().is_some_and(|k| keys.contains(k)),
            Expr::Ids(ids) => ids.contains(&m.id),
            Expr::Time(lo, hi) => *lo <= m.time && m.time <= *hi,
            Expr::Importance(lo, hi) => *lo <= m.importance as f64 && m.importance as f64 <= *hi,
            Expr::And(v) => v.iter().all(|e| e.eval(m)),
            Expr::Or(v) => v.iter().any(|e| e.eval(m)),
            Expr::Not(e) => !e.eval(m),
        }
    }

    fn to_where(&self) -> Where {
        match self {
            Expr::Ns { under: true, parts } => Where::namespace_under(parts.clone()),
            Expr::Ns {
                under: false,
                parts,
            } => Where::namespace(parts.clone()),
            Expr::Tags { all: true, tags } => Where::tags_all(tags.clone()),
            Expr::Tags { all: false, tags } => Where::tags_any(tags.clone()),
            Expr::Attr { name, op, values } => {
                let a = Where::attr(name.clone());
                let v = |i: usize| values[i].clone();
                match op {
                    AOp::Eq => a.eq(v(0)),
                    AOp::Ne => a.ne(v(0)),
                    AOp::Lt => a.lt(v(0)),
                    AOp::Le => a.le(v(0)),
                    AOp::Gt => a.gt(v(0)),
                    AOp::Ge => a.ge(v(0)),
                    AOp::In => a.is_in(values.clone()),
                    AOp::NotIn => a.not_in(values.clone()),
                    AOp::Between => a.between(v(0), v(1)),
                    AOp::Exists => a.exists(),
                }
            }
            Expr::Keys(k) => Where::keys(k.clone()),
            Expr::Ids(ids) => Where::ids(ids.iter().copied()),
            Expr::Time(lo, hi) => Where::time(*lo, *hi),
            Expr::Importance(lo, hi) => Where::importance(*lo, *hi),
            Expr::And(v) => Where::all_of(v.iter().map(Expr::to_where)),
            Expr::Or(v) => Where::any_of(v.iter().map(Expr::to_where)),
            Expr::Not(e) => !e.to_where(),
        }
    }
}

// ---------------------------------------------------------------------------
// Random data
// ---------------------------------------------------------------------------

const PARTS: [&str; 3] = ["u", "v", "w"];
const TAGS: [&str; 5] = ["a", "b", "c", "d", "e"];
const NAMES: [&str; 4] = ["year", "lang", "ok", "score"];
const STRS: [&str; 7] = ["", "a", "ab", "b", "en", "de", "\u{e9}t\u{e9}"];
const TIMES: [f64; 4] = [0.0, 10.0, 20.0, 30.0];
const IMPS: [f32; 4] = [0.0, 0.25, 0.5, 1.0];
const BOUNDS: [f64; 7] = [
    f64::NEG_INFINITY,
    0.0,
    10.0,
    15.0,
    20.0,
    30.0,
    f64::INFINITY,
];

fn pick<T: Clone>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.below(items.len() as u64) as usize].clone()
}

fn int_value(rng: &mut Rng) -> Value {
    // Small values meet the doubles below; the big ones test exactness
    // beyond 2^53 and at the ends of int64.
    let big = [1i64 << 53, (1i64 << 53) + 1, i64::MIN, i64::MAX];
    if rng.below(6) == 0 {
        Value::Int(pick(rng, &big))
    } else {
        Value::Int(rng.below(7) as i64 - 3)
    }
}

fn double_value(rng: &mut Rng) -> Value {
    // 2^53, and +-2^63 (what i64::MAX and i64::MIN round to).
    let big = [2f64.powi(53), 2f64.powi(63), -2f64.powi(63)];
    if rng.below(6) == 0 {
        Value::Double(pick(rng, &big))
    } else {
        Value::Double(rng.below(13) as f64 * 0.5 - 3.0)
    }
}

fn any_value(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => int_value(rng),
        1 => double_value(rng),
        2 => Value::Bool(rng.below(2) == 1),
        _ => Value::Str(pick(rng, &STRS).to_string()),
    }
}

/// A value an ordered comparison accepts (not a bool).
fn ordered_value(rng: &mut Rng) -> Value {
    match rng.below(3) {
        0 => int_value(rng),
        1 => double_value(rng),
        _ => Value::Str(pick(rng, &STRS).to_string()),
    }
}

fn subset(rng: &mut Rng, items: &[&str], max: u64) -> Vec<String> {
    (0..rng.below(max + 1))
        .map(|_| pick(rng, items).to_string())
        .collect()
}

fn namespace(rng: &mut Rng) -> Vec<String> {
    subset(rng, &PARTS, 3)
}

/// Random fields; each field is left out (None) with probability `skip`
/// in 4. `key` is the key to set, if any.
fn random_fields(rng: &mut Rng, key: Option<String>, skip: u64) -> Fields {
    let mut f = Fields::new();
    f.key = key;
    if rng.below(4) >= skip {
        f.namespace = Some(namespace(rng));
    }
    if rng.below(4) >= skip {
        f.tags = Some(subset(rng, &TAGS, 4));
    }
    if rng.below(4) >= skip {
        let mut attrs = BTreeMap::new();
        for _ in 0..rng.below(5) {
            // The same name takes values of every kind across memories.
            attrs.insert(pick(rng, &NAMES).to_string(), any_value(rng));
        }
        f.attributes = Some(attrs);
    }
    if rng.below(4) >= skip {
        let len = rng.below(6) as usize;
        // Payloads are bytes: not always UTF-8.
        f.payload = Some((0..len).map(|_| rng.below(256) as u8).collect());
    }
    f
}

fn random_expr(rng: &mut Rng, depth: u32, mems: &[Mem]) -> Expr {
    if depth > 0 && rng.below(5) < 2 {
        let n = rng.below(4) as usize;
        let kids = (0..n).map(|_| random_expr(rng, depth - 1, mems)).collect();
        return match rng.below(3) {
            0 => Expr::And(kids),
            1 => Expr::Or(kids),
            _ => Expr::Not(Box::new(random_expr(rng, depth - 1, mems))),
        };
    }
    match rng.below(8) {
        0 => Expr::Ns {
            under: rng.below(3) > 0,
            parts: namespace(rng),
        },
        1 => {
            let mut tags = subset(rng, &TAGS, 3);
            if rng.below(5) == 0 {
                tags.push("never".into());
            }
            Expr::Tags {
                all: rng.below(2) == 0,
                tags,
            }
        }
        2 => {
            let mut keys: Vec<String> = (0..rng.below(4))
                .filter_map(|_| pick(rng, mems).key.clone())
                .collect();
            if rng.below(3) == 0 {
                keys.push("no such key".into());
            }
            Expr::Keys(keys)
        }
        3 => {
            let mut ids: Vec<u64> = (0..rng.below(6)).map(|_| pick(rng, mems).id).collect();
            ids.push(rng.next_u64() >> 1); // not in the store
            Expr::Ids(ids)
        }
        4 => {
            let (a, b) = (pick(rng, &BOUNDS), pick(rng, &BOUNDS));
            if rng.below(2) == 0 {
                Expr::Time(a, b)
            } else {
                Expr::Importance(a / 30.0, b / 30.0)
            }
        }
        _ => {
            let mut name = pick(rng, &NAMES).to_string();
            if rng.below(10) == 0 {
                name = "missing".into();
            }
            let op = pick(
                rng,
                &[
                    AOp::Eq,
                    AOp::Ne,
                    AOp::Lt,
                    AOp::Le,
                    AOp::Gt,
                    AOp::Ge,
                    AOp::In,
                    AOp::NotIn,
                    AOp::Between,
                    AOp::Exists,
                ],
            );
            let values = match op {
                AOp::Eq | AOp::Ne => vec![any_value(rng)],
                AOp::Lt | AOp::Le | AOp::Gt | AOp::Ge => vec![ordered_value(rng)],
                AOp::In | AOp::NotIn => (0..rng.below(4)).map(|_| any_value(rng)).collect(),
                AOp::Between => {
                    if rng.below(3) == 0 {
                        let s = |rng: &mut Rng| Value::Str(pick(rng, &STRS).to_string());
                        vec![s(rng), s(rng)]
                    } else {
                        let num = |rng: &mut Rng| {
                            if rng.below(2) == 0 {
                                int_value(rng)
                            } else {
                                double_value(rng)
                            }
                        };
                        vec![num(rng), num(rng)]
                    }
                }
                AOp::Exists => vec![],
            };
            Expr::Attr { name, op, values }
        }
    }
}

// ---------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------

struct World {
    mems: Vec<Mem>,
    dim: usize,
    metric: Metric,
    next_key: u64,
}

impl World {
    fn matching(&self, e: &Expr) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .mems
            .iter()
            .filter(|m| e.eval(m))
            .map(|m| m.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    fn fresh_key(&mut self) -> String {
        self.next_key += 1;
        format!("key-{}", self.next_key)
    }

    fn find(&mut self, id: u64) -> Option<&mut Mem> {
        self.mems.iter_mut().find(|m| m.id == id)
    }
}

fn check_reads(what: &str, store: &Store<f32>, w: &World, rng: &mut Rng) {
    let mut ids: Vec<u64> = w.mems.iter().map(|m| m.id).collect();
    ids.push(rng.next_u64() >> 1); // absent
    let got = store.read(&ids).unwrap();
    assert_eq!(got.len(), ids.len());
    for (m, g) in w.mems.iter().zip(&got) {
        let g = g
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: read({}) not found", m.id));
        assert_eq!(g.id, m.id, "{what}");
        assert_eq!(g.fields, m.fields(), "{what}: fields of {}", m.id);
        assert_eq!(
            (g.time, g.importance),
            (m.time, m.importance),
            "{what}: meta of {}",
            m.id
        );
    }
    assert!(
        got.last().unwrap().is_none(),
        "{what}: an absent id was found"
    );

    // Keys map both ways.
    let keys: Vec<String> = w.mems.iter().filter_map(|m| m.key.clone()).collect();
    let mut asked = keys.clone();
    asked.push("no such key".into());
    let found = store.ids_of_keys(&asked).unwrap();
    for (k, id) in asked.iter().zip(&found) {
        let want = w
            .mems
            .iter()
            .find(|m| m.key.as_ref() == Some(k))
            .map(|m| m.id);
        assert_eq!(*id, want, "{what}: ids_of_keys({k:?})");
    }

    // Namespaces in use, with their counts.
    let mut want: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for m in &w.mems {
        if let Some(ns) = &m.ns {
            *want.entry(ns.clone()).or_default() += 1;
        }
    }
    let got: BTreeMap<Vec<String>, u64> = store
        .namespaces()
        .unwrap()
        .into_iter()
        .map(|n| (n.path, n.memories))
        .collect();
    assert_eq!(got, want, "{what}: namespaces");
}

/// The reference ranking keys of `candidates` for query `q`.
fn reference_keys(w: &World, q: &[f32], candidates: &[u64]) -> (Vec<(u64, f64)>, Vec<f64>) {
    let q64: Vec<f64> = q.iter().map(|&x| x as f64).collect();
    let mut keys = Vec::new();
    let mut tols = Vec::new();
    for &id in candidates {
        let m = w.mems.iter().find(|m| m.id == id).unwrap();
        let v: Vec<f64> = m.vector.iter().map(|&x| x as f64).collect();
        let s = reference::score(w.metric, &q64, &v);
        keys.push((id, s));
        tols.push(score_tol(w.metric, s, norm(&q64), norm(&v)));
    }
    (keys, tols)
}

/// One row of a scoped search against the reference over `candidates`:
/// min(k, candidates) hits in order, and where the reference ties exactly
/// at the last place, the smaller id was kept.
fn check_row(what: &str, w: &World, q: &[f32], hits: &[Hit], candidates: &[u64], k: usize) {
    let (keys, tols) = reference_keys(w, q, candidates);
    let tol = |id: u64| tols[keys.iter().position(|c| c.0 == id).unwrap()];
    check_top_k(what, w.metric, hits, &keys, k, &tol, 0.0);
    if let Some(last) = hits.last() {
        let last_key = keys.iter().find(|c| c.0 == last.id).unwrap().1;
        for &(id, key) in &keys {
            let kept = hits.iter().any(|h| h.id == id);
            assert!(
                kept || key != last_key || id > last.id,
                "{what}: id {id} ties with the last hit {} but is smaller and was left out",
                last.id
            );
        }
    }
}

fn check_filters(what: &str, store: &Store<f32>, w: &World, rng: &mut Rng, rounds: usize) {
    let nq = 3;
    let queries: AlignedVec<f32> = rng.rows(nq, w.dim);
    let n = w.mems.len();
    for round in 0..rounds {
        let e = random_expr(rng, 3, &w.mems);
        let want = w.matching(&e);
        let wh = e.to_where();
        let at = format!("{what} round {round} {e:?}");

        // Selections: everything, then a page.
        let all = store.select(&wh, 0, u64::MAX).unwrap();
        assert_eq!(all.ids, want, "{at}: select");
        assert_eq!(all.total, want.len() as u64, "{at}: select total");
        let (off, lim) = (rng.below(want.len() as u64 + 2), rng.below(5));
        let page = store.select(&wh, off, lim).unwrap();
        let lo = (off as usize).min(want.len());
        let hi = (lo + lim as usize).min(want.len());
        assert_eq!(page.ids, &want[lo..hi], "{at}: select({off}, {lim})");
        assert_eq!(page.total, want.len() as u64, "{at}: page total");

        // Scoped search, against the reference and against the same search
        // restricted by an id allow-list (the same candidates).
        let k = pick(rng, &[1usize, 3, 10, n + 2]);
        let opts = SearchOptions::new().where_(&wh);
        let hits = store.search_with(&queries, k, &opts).unwrap();
        for (q, row) in hits.iter().enumerate() {
            let qv = &queries[q * w.dim..(q + 1) * w.dim];
            check_row(&format!("{at} k={k} q={q}"), w, qv, row, &want, k);
        }
        let allow = AlignedVec::from_slice(&want);
        let by_ids = store
            .search_with(
                &queries,
                k,
                &SearchOptions::new().filter(Filter::Ids(&allow)),
            )
            .unwrap();
        assert_eq!(hits, by_ids, "{at} k={k}: where vs the id allow-list");

        // The raw form: min(k, matches) results, then NO_ID and NaN.
        let kk = want.len() + 2;
        let mut ids = AlignedVec::from_elem(0u64, nq * kk);
        let mut scores = AlignedVec::from_elem(7.0f32, nq * kk);
        store
            .search_into(&queries, kk, &opts, &mut ids, &mut scores)
            .unwrap();
        for q in 0..nq {
            for j in 0..kk {
                let (id, s) = (ids[q * kk + j], scores[q * kk + j]);
                if j < want.len() {
                    assert!(
                        id != NO_ID && !s.is_nan(),
                        "{at}: slot {j} of query {q} is empty"
                    );
                } else {
                    assert!(
                        id == NO_ID && s.is_nan(),
                        "{at}: padding at {j} of query {q}"
                    );
                }
            }
        }
    }

    // The per-query form: each row as its own expression scopes it; an
    // entry None leaves its query to `where_` (here: none).
    let exprs: Vec<Option<Expr>> = (0..nq)
        .map(|_| (rng.below(4) > 0).then(|| random_expr(rng, 2, &w.mems)))
        .collect();
    let each: Vec<Option<Where>> = exprs
        .iter()
        .map(|e| e.as_ref().map(Expr::to_where))
        .collect();
    let k = 5;
    let hits = store
        .search_with(&queries, k, &SearchOptions::new().where_each(&each))
        .unwrap();
    for (q, (row, e)) in hits.iter().zip(&exprs).enumerate() {
        let want = match e {
            Some(e) => w.matching(e),
            None => w.mems.iter().map(|m| m.id).collect(),
        };
        let qv = &queries[q * w.dim..(q + 1) * w.dim];
        check_row(
            &format!("{what} where_each q={q} {e:?}"),
            w,
            qv,
            row,
            &want,
            k,
        );
    }
    // With `where_` as well, a memory must pass both.
    let both = random_expr(rng, 2, &w.mems);
    let both_w = both.to_where();
    let hits = store
        .search_with(
            &queries,
            k,
            &SearchOptions::new().where_(&both_w).where_each(&each),
        )
        .unwrap();
    for (q, (row, e)) in hits.iter().zip(&exprs).enumerate() {
        let want: Vec<u64> = w
            .matching(&both)
            .into_iter()
            .filter(|id| {
                let m = w.mems.iter().find(|m| m.id == *id).unwrap();
                e.as_ref().is_none_or(|e| e.eval(m))
            })
            .collect();
        let qv = &queries[q * w.dim..(q + 1) * w.dim];
        check_row(
            &format!("{what} where + where_each q={q}"),
            w,
            qv,
            row,
            &want,
            k,
        );
    }
}

/// Adds `count` memories: fresh ids, some with the vector of an earlier
/// memory (exact ties), half with a key.
fn add_batch(store: &Store<f32>, w: &mut World, rng: &mut Rng, count: usize) {
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    let mut times = Vec::new();
    let mut imps = Vec::new();
    let mut fields = Vec::new();
    for _ in 0..count {
        let id = loop {
            let id = rng.next_u64() >> rng.below(50);
            if id != NO_ID && !ids.contains(&id) && w.mems.iter().all(|m| m.id != id) {
                break id;
            }
        };
        let v = if !w.mems.is_empty() && rng.below(6) == 0 {
            pick(rng, &w.mems).vector
        } else {
            rng.rows(1, w.dim).to_vec()
        };
        let key = (rng.below(2) == 0).then(|| w.fresh_key());
        let f = random_fields(rng, key, 0);
        let mut m = Mem::new(id, v.clone());
        m.time = pick(rng, &TIMES);
        m.importance = pick(rng, &IMPS);
        m.apply(&f);
        ids.push(id);
        vectors.extend(v);
        times.push(m.time);
        imps.push(m.importance);
        fields.push(f);
        w.mems.push(m);
    }
    store
        .add_memories_with_fields(
            &AlignedVec::from_slice(&ids),
            &AlignedVec::from_slice(&vectors),
            Some(&AlignedVec::from_slice(&times)),
            Some(&AlignedVec::from_slice(&imps)),
            &fields,
        )
        .unwrap();
}

/// Upserts (new vectors, some fields left out, times kept), field updates,
/// removals and fresh memories, applied to the store and the model alike.
fn mutate(store: &Store<f32>, w: &mut World, rng: &mut Rng) {
    // Upserts through add_with_fields.
    let picked: BTreeSet<u64> = (0..w.mems.len() / 5)
        .map(|_| pick(rng, &w.mems).id)
        .collect();
    let (mut ids, mut vectors, mut fields) = (Vec::new(), Vec::new(), Vec::new());
    for &id in &picked {
        let key = match rng.below(4) {
            0 => Some(String::new()), // drop the key
            1 => Some(w.fresh_key()),
            _ => None, // keep it
        };
        let f = random_fields(rng, key, 2);
        let v = rng.rows(1, w.dim).to_vec();
        let m = w.find(id).unwrap();
        m.vector = v.clone();
        m.apply(&f);
        ids.push(id);
        vectors.extend(v);
        fields.push(f);
    }
    store
        .add_with_fields(
            &AlignedVec::from_slice(&ids),
            &AlignedVec::from_slice(&vectors),
            &fields,
        )
        .unwrap();

    // Field updates in place; some take keys freed by the upserts above.
    let freed: Vec<String> = (1..=w.next_key)
        .map(|i| format!("key-{i}"))
        .filter(|k| w.mems.iter().all(|m| m.key.as_ref() != Some(k)))
        .collect();
    let picked: BTreeSet<u64> = (0..w.mems.len() / 5)
        .map(|_| pick(rng, &w.mems).id)
        .collect();
    let (mut ids, mut fields) = (Vec::new(), Vec::new());
    let mut reused = BTreeSet::new();
    for &id in &picked {
        let key = match rng.below(3) {
            0 if !freed.is_empty() => {
                let k = pick(rng, &freed);
                reused.insert(k.clone()).then_some(k)
            }
            _ => None,
        };
        let f = random_fields(rng, key, 2);
        w.find(id).unwrap().apply(&f);
        ids.push(id);
        fields.push(f);
    }
    store
        .update_fields(&AlignedVec::from_slice(&ids), &fields)
        .unwrap();

    // Removals beyond a quarter of the slots: the store compacts.
    let gone: BTreeSet<u64> = (0..w.mems.len() / 3)
        .map(|_| pick(rng, &w.mems).id)
        .collect();
    let gone_ids: Vec<u64> = gone.iter().copied().collect();
    let removed = store.remove(&AlignedVec::from_slice(&gone_ids)).unwrap();
    assert_eq!(removed, gone.len() as u64);
    w.mems.retain(|m| !gone.contains(&m.id));

    add_batch(store, w, rng, 20);
}

fn run(under: &Under, metric: Metric, seed: u64) {
    let mut rng = Rng::new(seed);
    let dim = 3 + rng.below(14) as usize;
    let store = Store::<f32>::new(&under.rt, dim, metric).unwrap();
    let mut w = World {
        mems: Vec::new(),
        dim,
        metric,
        next_key: 0,
    };
    // Several batches, so the store grows with fields already in place.
    for size in [1, 60, 90] {
        add_batch(&store, &mut w, &mut rng, size);
    }
    // A memory added without fields has none.
    let bare = rng.next_u64() >> 2;
    if w.mems.iter().all(|m| m.id != bare) {
        let v: AlignedVec<f32> = rng.rows(1, dim);
        store.add(&AlignedVec::from_slice(&[bare]), &v).unwrap();
        w.mems.push(Mem::new(bare, v.to_vec()));
    }
    for round in 0..3 {
        let what = format!("{} {metric:?} seed {seed} round {round}", under.name);
        check_reads(&what, &store, &w, &mut rng);
        check_filters(&what, &store, &w, &mut rng, 60);
        mutate(&store, &mut w, &mut rng);
    }
}

#[test]
fn filters_match_the_model() {
    for under in backends::exact() {
        for (i, metric) in [Metric::Cosine, Metric::Dot, Metric::L2Sq]
            .into_iter()
            .enumerate()
        {
            run(&under, metric, 0xf1e1d5 + i as u64);
        }
    }
}

/// A long chain of ANDs and ORs stays one node each (the library refuses
/// trees deeper than 256 levels), and a deep NOT chain evaluates as the
/// model does.
#[test]
fn long_chains() {
    let rt = backends::cpu();
    let store = Store::<f32>::new(&rt, 1, Metric::Dot).unwrap();
    let ids: Vec<u64> = (1..=50).collect();
    let fields: Vec<Fields> = ids
        .iter()
        .map(|&i| Fields::new().attr("i", i as i64))
        .collect();
    store
        .add_with_fields(
            &AlignedVec::from_slice(&ids),
            &AlignedVec::from_elem(1.0f32, ids.len()),
            &fields,
        )
        .unwrap();
    let ors = (1..=1000).fold(Where::nothing(), |w, i| w | Where::attr("i").eq(i % 25));
    assert_eq!(
        store.select(&ors, 0, 100).unwrap().ids,
        (1..=24).collect::<Vec<_>>()
    );
    let ands = (0..1000).fold(Where::all(), |w, i| w & Where::attr("i").ge(i % 10));
    assert_eq!(store.select(&ands, 0, 100).unwrap().total, 42);
    let mut not = Where::attr("i").le(10);
    for _ in 0..101 {
        not = !not;
    }
    assert_eq!(
        store.select(&not, 0, 100).unwrap().ids,
        (11..=50).collect::<Vec<_>>()
    );
}
