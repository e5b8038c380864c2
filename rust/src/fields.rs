//! What a memory holds besides its vector: a key, a namespace, tags, typed
//! attributes and a payload ([`Fields`]), written with
//! [`Store::add_with_fields`] or [`Store::update_fields`] and read back with
//! [`Store::read`].

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::NonNull;

use crate::aligned::{expect_len, in_ptr, opt_in_ptr, out_ptr, product, AlignedVec, OutScalar};
use crate::dtype::{DType, Storage};
use crate::error::{check, Error, Result, Status};
use crate::filter::Where;
use crate::store::{Store, NO_ID};
use crate::sys;

/// A typed attribute value, or a filter's operand. Integers and doubles
/// compare with each other as numbers (exactly, even beyond 2^53), strings
/// bytewise, booleans only by equality.
///
/// ```
/// use mnemo::Value;
/// assert_eq!(Value::from(2020), Value::Int(2020));
/// assert_eq!(Value::from(0.5), Value::Double(0.5));
/// assert_eq!(Value::from("en"), Value::Str("en".into()));
/// assert_eq!(Value::from(true), Value::Bool(true));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A signed 64-bit integer.
    Int(i64),
    /// A finite double (NaN or infinity is refused by the library).
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string without NUL bytes, at most
    /// [`MAX_NAME_BYTES`](crate::sys::MNEMO_MAX_NAME_BYTES) long.
    Str(String),
}

macro_rules! value_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
value_from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Double(v)
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Double(f64::from(v))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Str(v.clone())
    }
}

/// The fields of one memory. As written, `None` leaves a field as it is (a
/// new memory starts without it) and `Some` replaces it, an empty value
/// clearing it. As read back ([`Memory::fields`]), `Some` marks exactly the
/// fields the memory has, so writing a read-back `Fields` reproduces it.
///
/// Keys are unique in a store; tags are a set (read back sorted, without
/// repeats); attributes are read back sorted by name. The library's limits
/// (key and name lengths, namespace depth, tag and attribute counts, payload
/// size: the `MNEMO_MAX_*` constants of [`sys`](crate::sys)) are
/// [`Status::InvalidArgument`] beyond them.
///
/// ```
/// use mnemo::Fields;
/// let f = Fields::new()
///     .key("doc-17")
///     .namespace(["users", "42", "episodic"])
///     .tags(["news", "en"])
///     .attr("year", 2021)
///     .attr("lang", "en")
///     .payload("the text of the memory");
/// assert_eq!(f.key.as_deref(), Some("doc-17"));
/// assert_eq!(f.attributes.as_ref().unwrap()["year"], mnemo::Value::Int(2021));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    /// A string unique in the store, mapped to the memory's id.
    pub key: Option<String>,
    /// A path such as `["users", "42", "episodic"]`.
    pub namespace: Option<Vec<String>>,
    /// A set of strings.
    pub tags: Option<Vec<String>>,
    /// Name -> value.
    pub attributes: Option<BTreeMap<String, Value>>,
    /// Bytes returned as given and never searched (text, a JSON document).
    pub payload: Option<Vec<u8>>,
}

impl Fields {
    /// Nothing set.
    ///
    /// ```
    /// assert_eq!(mnemo::Fields::new(), mnemo::Fields::default());
    /// ```
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Sets the key (`""` clears it).
    pub fn key(mut self, key: impl Into<String>) -> Fields {
        self.key = Some(key.into());
        self
    }

    /// Sets the namespace (no parts clears it).
    pub fn namespace<I, S>(mut self, parts: I) -> Fields
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespace = Some(parts.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the tags (none clears them).
    pub fn tags<I, S>(mut self, tags: I) -> Fields
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tags = Some(tags.into_iter().map(Into::into).collect());
        self
    }

    /// Adds one attribute to those this write sets (the write replaces all
    /// of the memory's attributes by them).
    pub fn attr(mut self, name: impl Into<String>, value: impl Into<Value>) -> Fields {
        self.attributes
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), value.into());
        self
    }

    /// Sets the payload (empty clears it).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Fields {
        self.payload = Some(payload.into());
        self
    }

    /// The payload as text, when it is UTF-8.
    ///
    /// ```
    /// let f = mnemo::Fields::new().payload("hello");
    /// assert_eq!(f.payload_str(), Some("hello"));
    /// ```
    pub fn payload_str(&self) -> Option<&str> {
        self.payload
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
    }
}

/// A memory read back by [`Store::read`]: its id, fields, last-access time
/// and importance.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    /// The memory's id.
    pub id: u64,
    /// The fields it has (`Some`) and lacks (`None`).
    pub fields: Fields,
    /// Last-access time (seconds; 0 when never given).
    pub time: f64,
    /// Importance (0 when never given).
    pub importance: f32,
}

/// One namespace in use, from [`Store::namespaces`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceUse {
    /// Its parts.
    pub path: Vec<String>,
    /// How many memories hold exactly this namespace.
    pub memories: u64,
}

/// What [`Store::select`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Matching ids in ascending order, after the offset, at most the limit.
    pub ids: Vec<u64>,
    /// How many memories match in all.
    pub total: u64,
}

pub(crate) fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} {s:?} contains a NUL byte")))
}

/// Owns the C strings that raw values and fields point into, for the length
/// of one call.
#[derive(Default)]
pub(crate) struct ValueArena {
    strings: Vec<CString>,
}

impl ValueArena {
    fn str(&mut self, s: &str, what: &str) -> Result<*const c_char> {
        let c = c_string(s, what)?;
        // A CString's bytes stay put when the Vec holding it grows.
        let p = c.as_ptr();
        self.strings.push(c);
        Ok(p)
    }

    pub(crate) fn value(&mut self, v: &Value, what: &str) -> Result<sys::mnemo_value> {
        let mut raw = sys::mnemo_value {
            type_: 0,
            reserved: 0,
            i: 0,
            d: 0.0,
            s: std::ptr::null(),
        };
        match v {
            Value::Int(i) => {
                raw.type_ = sys::MNEMO_VALUE_INT as i32;
                raw.i = *i;
            }
            Value::Double(d) => {
                raw.type_ = sys::MNEMO_VALUE_DOUBLE as i32;
                raw.d = *d;
            }
            Value::Bool(b) => {
                raw.type_ = sys::MNEMO_VALUE_BOOL as i32;
                raw.i = i64::from(*b);
            }
            Value::Str(s) => {
                raw.type_ = sys::MNEMO_VALUE_STRING as i32;
                raw.s = self.str(s, what)?;
            }
        }
        Ok(raw)
    }
}

/// The C form of a batch of [`Fields`], with everything it points to.
struct RawFields<'a> {
    _arena: ValueArena,
    // Pointer arrays per memory; their heap buffers do not move when these
    // outer vectors grow.
    _parts: Vec<Vec<*const c_char>>,
    _attrs: Vec<Vec<sys::mnemo_attribute>>,
    raw: Vec<sys::mnemo_memory_fields>,
    _borrow: std::marker::PhantomData<&'a [Fields]>,
}

fn count_u32(n: usize, what: &str, i: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("fields[{i}]: {what}: {n} is too many")))
}

impl<'a> RawFields<'a> {
    fn new(fields: &'a [Fields]) -> Result<RawFields<'a>> {
        let mut arena = ValueArena::default();
        let mut parts = Vec::new();
        let mut attrs = Vec::new();
        let mut raw = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            // SAFETY: plain function returning a struct by value.
            let mut r = unsafe { sys::mnemo_memory_fields_default() };
            if let Some(key) = &f.key {
                r.set |= sys::MNEMO_FIELD_KEY;
                r.key = arena.str(key, &format!("fields[{i}].key"))?;
            }
            if let Some(ns) = &f.namespace {
                r.set |= sys::MNEMO_FIELD_NAMESPACE;
                let p = ns
                    .iter()
                    .map(|s| arena.str(s, &format!("fields[{i}].namespace part")))
                    .collect::<Result<Vec<_>>>()?;
                r.namespace_depth = count_u32(p.len(), "namespace parts", i)?;
                r.namespace_parts = p.as_ptr();
                parts.push(p);
            }
            if let Some(tags) = &f.tags {
                r.set |= sys::MNEMO_FIELD_TAGS;
                let p = tags
                    .iter()
                    .map(|s| arena.str(s, &format!("fields[{i}].tag")))
                    .collect::<Result<Vec<_>>>()?;
                r.tag_count = count_u32(p.len(), "tags", i)?;
                r.tags = p.as_ptr();
                parts.push(p);
            }
            if let Some(map) = &f.attributes {
                r.set |= sys::MNEMO_FIELD_ATTRIBUTES;
                let mut a = Vec::with_capacity(map.len());
                for (name, v) in map {
                    let at = format!("fields[{i}].attributes[{name:?}]");
                    a.push(sys::mnemo_attribute {
                        name: arena.str(name, &at)?,
                        value: arena.value(v, &at)?,
                    });
                }
                r.attribute_count = count_u32(a.len(), "attributes", i)?;
                r.attributes = a.as_ptr();
                attrs.push(a);
            }
            if let Some(p) = &f.payload {
                r.set |= sys::MNEMO_FIELD_PAYLOAD;
                r.payload = p.as_ptr().cast();
                r.payload_bytes = p.len() as u64;
            }
            raw.push(r);
        }
        Ok(RawFields {
            _arena: arena,
            _parts: parts,
            _attrs: attrs,
            raw,
            _borrow: std::marker::PhantomData,
        })
    }
}

/// Text from the library (UTF-8 by contract; anything else is replaced
/// rather than refused, as the store may hold what another language wrote).
///
/// # Safety
/// `p` must be a valid NUL-terminated string.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// # Safety
/// `p` must point to `n` valid NUL-terminated strings (or `n` be 0).
unsafe fn texts(p: *const *const c_char, n: u32) -> Vec<String> {
    if n == 0 || p.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
        .iter()
        // SAFETY: each entry is a valid string (the caller's promise).
        .map(|&s| unsafe { text(s) })
        .collect()
}

/// # Safety
/// Every pointer in `r` must be valid for the counts it gives (as
/// mnemo_records_get fills it).
unsafe fn fields_from_raw(r: &sys::mnemo_memory_fields) -> Fields {
    let has = |bit: u32| r.set & bit != 0;
    let mut f = Fields::new();
    if has(sys::MNEMO_FIELD_KEY) {
        // SAFETY: key is NULL or a valid string.
        f.key = Some(unsafe { text(r.key) });
    }
    if has(sys::MNEMO_FIELD_NAMESPACE) {
        // SAFETY: namespace_depth valid strings.
        f.namespace = Some(unsafe { texts(r.namespace_parts, r.namespace_depth) });
    }
    if has(sys::MNEMO_FIELD_TAGS) {
        // SAFETY: tag_count valid strings.
        f.tags = Some(unsafe { texts(r.tags, r.tag_count) });
    }
    if has(sys::MNEMO_FIELD_ATTRIBUTES) {
        let mut map = BTreeMap::new();
        if r.attribute_count > 0 && !r.attributes.is_null() {
            // SAFETY: attribute_count valid attributes.
            let attrs =
                unsafe { std::slice::from_raw_parts(r.attributes, r.attribute_count as usize) };
            for a in attrs {
                let v = &a.value;
                let value = match v.type_ as u32 {
                    sys::MNEMO_VALUE_INT => Value::Int(v.i),
                    sys::MNEMO_VALUE_DOUBLE => Value::Double(v.d),
                    sys::MNEMO_VALUE_BOOL => Value::Bool(v.i != 0),
                    // SAFETY: a STRING value's s is a valid string.
                    _ => Value::Str(unsafe { text(v.s) }),
                };
                // SAFETY: name is a valid string.
                map.insert(unsafe { text(a.name) }, value);
            }
        }
        f.attributes = Some(map);
    }
    if has(sys::MNEMO_FIELD_PAYLOAD) {
        f.payload = Some(if r.payload_bytes == 0 || r.payload.is_null() {
            Vec::new()
        } else {
            // SAFETY: payload holds payload_bytes bytes.
            unsafe { std::slice::from_raw_parts(r.payload.cast::<u8>(), r.payload_bytes as usize) }
                .to_vec()
        });
    }
    f
}

/// Owns an `mnemo_records` snapshot for the length of [`Store::read`].
struct Records(NonNull<sys::mnemo_records>);

impl Drop for Records {
    fn drop(&mut self) {
        // SAFETY: from mnemo_store_read, destroyed once.
        unsafe { sys::mnemo_records_destroy(self.0.as_ptr()) }
    }
}

/// Owns an `mnemo_namespaces` list for the length of [`Store::namespaces`].
struct Namespaces(NonNull<sys::mnemo_namespaces>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        // SAFETY: from mnemo_store_namespaces, destroyed once.
        unsafe { sys::mnemo_namespaces_destroy(self.0.as_ptr()) }
    }
}

impl<T: Storage> Store<T> {
    /// [`Store::add`] with each memory's fields: `fields[i]` belongs to
    /// `ids[i]` (a repeated id takes its last entry). On an upsert, fields
    /// left `None` keep their values. A key already held by another memory
    /// (before the call or earlier in it) is [`Status::InvalidArgument`]
    /// naming both; on any error the store is unchanged.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Fields, Metric, Runtime, Store, Where};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 2, Metric::Cosine)?;
    /// let ids = AlignedVec::from_slice(&[1u64, 2]);
    /// let vectors = AlignedVec::from_slice(&[1.0, 0.0, 0.0, 1.0]);
    /// store.add_with_fields(&ids, &vectors, &[
    ///     Fields::new().key("a").tags(["news"]).attr("year", 2019),
    ///     Fields::new().key("b").attr("year", 2023),
    /// ])?;
    /// assert_eq!(store.ids_of_keys(&["b", "zzz"])?, [Some(2), None]);
    /// assert_eq!(store.select(&Where::attr("year").ge(2020), 0, 10)?.ids, [2]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add_with_fields(&self, ids: &[u64], vectors: &[f32], fields: &[Fields]) -> Result<()> {
        self.add_memories_with_fields(ids, vectors, None, None, fields)
    }

    /// [`Store::add_memories`] (times and importances) with each memory's
    /// fields, as [`Store::add_with_fields`].
    ///
    /// ```
    /// use mnemo::{AlignedVec, Fields, Metric, Runtime, Store};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[5u64]);
    /// let times = AlignedVec::from_slice(&[1.7e9]);
    /// store.add_memories_with_fields(&ids, &AlignedVec::from_slice(&[1.0]), Some(&times), None,
    ///     &[Fields::new().payload("hi")])?;
    /// let m = store.read(&[5])?.remove(0).unwrap();
    /// assert_eq!((m.time, m.fields.payload_str()), (1.7e9, Some("hi")));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn add_memories_with_fields(
        &self,
        ids: &[u64],
        vectors: &[f32],
        times: Option<&[f64]>,
        importance: Option<&[f32]>,
        fields: &[Fields],
    ) -> Result<()> {
        expect_len(
            vectors.len(),
            product(ids.len(), self.dim(), "vectors")?,
            "vectors",
        )?;
        expect_len(fields.len(), ids.len(), "fields")?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let vec_ptr = in_ptr(vectors, "vectors")?;
        let times_ptr = opt_in_ptr(times, ids.len(), "times")?;
        let imp_ptr = opt_in_ptr(importance, ids.len(), "importance")?;
        let raw = RawFields::new(fields)?;
        // SAFETY: live store; ids, vectors (count * dim f32), times and
        // importance (count or NULL) checked and aligned above; raw holds
        // count field structs whose pointers it keeps alive.
        check(unsafe {
            sys::mnemo_store_add_with_fields(
                self.raw(),
                ids_ptr,
                vec_ptr.cast(),
                DType::F32.code(),
                ids.len() as u64,
                times_ptr,
                imp_ptr,
                raw.raw.as_ptr(),
            )
        })
    }

    /// Replaces, for each existing memory `ids[i]`, the fields `fields[i]`
    /// sets (`Some`), leaving its vector, slot and other fields as they are.
    /// An absent id is [`Status::NotFound`]; on any error nothing changes.
    ///
    /// ```
    /// use mnemo::{AlignedVec, Fields, Metric, Runtime, Store, Where};
    /// let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[1u64]);
    /// store.add_with_fields(&ids, &AlignedVec::from_slice(&[1.0]), &[Fields::new().key("k").tags(["a"])])?;
    /// store.update_fields(&ids, &[Fields::new().tags(["b"])])?;
    /// let f = store.read(&[1])?.remove(0).unwrap().fields;
    /// assert_eq!((f.key.as_deref(), f.tags), (Some("k"), Some(vec!["b".to_string()])));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn update_fields(&self, ids: &[u64], fields: &[Fields]) -> Result<()> {
        expect_len(fields.len(), ids.len(), "fields")?;
        let ids_ptr = in_ptr(ids, "ids")?;
        let raw = RawFields::new(fields)?;
        // SAFETY: live store; ids aligned with count entries; raw holds
        // count field structs whose pointers it keeps alive.
        check(unsafe {
            sys::mnemo_store_update_fields(self.raw(), ids_ptr, raw.raw.as_ptr(), ids.len() as u64)
        })
    }

    /// The id holding each key, `None` where no memory holds it (a key
    /// with a NUL byte cannot be held, so it is `None` too).
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Fields, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add_with_fields(&AlignedVec::from_slice(&[9u64]), &AlignedVec::from_slice(&[1.0]),
    ///     &[Fields::new().key("nine")])?;
    /// assert_eq!(store.ids_of_keys(&["nine", "ten"])?, [Some(9), None]);
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn ids_of_keys<S: AsRef<str>>(&self, keys: &[S]) -> Result<Vec<Option<u64>>> {
        let mut owned = Vec::with_capacity(keys.len());
        let mut asked = Vec::with_capacity(keys.len()); // positions sent to C
        for (i, k) in keys.iter().enumerate() {
            if let Ok(c) = CString::new(k.as_ref()) {
                owned.push(c);
                asked.push(i);
            }
        }
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut ids = AlignedVec::from_elem(NO_ID, ptrs.len());
        let ids_ptr = out_ptr(&mut ids, "ids")?;
        // SAFETY: live store; ptrs holds count NUL-terminated keys kept
        // alive by `owned`; ids holds count aligned places.
        check(unsafe {
            sys::mnemo_store_ids_of_keys(self.raw(), ptrs.as_ptr(), ptrs.len() as u64, ids_ptr)
        })?;
        let mut out = vec![None; keys.len()];
        for (&pos, &id) in asked.iter().zip(ids.iter()) {
            out[pos] = (id != NO_ID).then_some(id);
        }
        Ok(out)
    }

    /// Reads back the memories `ids`, in order: `None` for an id not in
    /// the store. One consistent snapshot (a concurrent write lands either
    /// wholly before or wholly after it).
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Fields, Metric, Runtime, Store, Value};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add_with_fields(&AlignedVec::from_slice(&[3u64]), &AlignedVec::from_slice(&[1.0]),
    ///     &[Fields::new().tags(["b", "a", "b"]).attr("n", 1)])?;
    /// let got = store.read(&[3, 4])?;
    /// let f = &got[0].as_ref().unwrap().fields;
    /// assert_eq!(f.tags, Some(vec!["a".to_string(), "b".to_string()]));
    /// assert_eq!(f.attributes.as_ref().unwrap()["n"], Value::Int(1));
    /// assert_eq!((f.key.clone(), f.payload.clone()), (None, None));
    /// assert!(got[1].is_none());
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn read(&self, ids: &[u64]) -> Result<Vec<Option<Memory>>> {
        // The library wants the id array aligned; callers pass any slice.
        let ids = AlignedVec::from_slice(ids);
        let ids_ptr = in_ptr(&ids, "ids")?;
        let mut out: *mut sys::mnemo_records = std::ptr::null_mut();
        // SAFETY: live store; ids aligned with count entries; out is a
        // valid place.
        check(unsafe { sys::mnemo_store_read(self.raw(), ids_ptr, ids.len() as u64, &mut out) })?;
        let records = Records(NonNull::new(out).ok_or_else(|| {
            Error::new(Status::Internal, "the library returned OK without records")
        })?);
        let mut result = Vec::with_capacity(ids.len());
        for i in 0..ids.len() {
            let mut found = 0u32;
            let mut id = 0u64;
            let mut time = 0f64;
            let mut importance = 0f32;
            // SAFETY: plain function returning a struct by value.
            let mut raw = unsafe { sys::mnemo_memory_fields_default() };
            // SAFETY: live records; i < count; every out is a valid place.
            check(unsafe {
                sys::mnemo_records_get(
                    records.0.as_ptr(),
                    i as u64,
                    &mut found,
                    &mut id,
                    &mut raw,
                    &mut time,
                    &mut importance,
                )
            })?;
            if found == 0 {
                result.push(None);
                continue;
            }
            // SAFETY: raw points into `records`, alive until the end of
            // this function, with the counts mnemo_records_get wrote.
            let fields = unsafe { fields_from_raw(&raw) };
            result.push(Some(Memory {
                id,
                fields,
                time,
                importance,
            }));
        }
        Ok(result)
    }

    /// The ids of the memories `filter` matches, in ascending order: the
    /// first `offset` skipped, at most `limit` returned, and how many match
    /// in all ([`Where::all`] selects every memory).
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Fields, Metric, Runtime, Store, Where};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// let ids = AlignedVec::from_slice(&[4u64, 1, 3, 2]);
    /// let fields: Vec<Fields> = (0..4).map(|i| Fields::new().attr("i", i)).collect();
    /// store.add_with_fields(&ids, &AlignedVec::from_slice(&[1.0; 4]), &fields)?;
    /// let page = store.select(&Where::attr("i").ge(1), 1, 2)?;
    /// assert_eq!((page.ids, page.total), (vec![2, 3], 3));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn select(&self, filter: &Where, offset: u64, limit: u64) -> Result<Selection> {
        let handle = filter.handle()?;
        // No more can match than are stored; a write racing this count only
        // shortens the page it would have lengthened.
        let cap =
            usize::try_from(limit.min(self.count()?)).map_err(|_| Error::overflow("selection"))?;
        let mut ids = AlignedVec::from_elem(NO_ID, cap);
        let ids_ptr = out_ptr(&mut ids, "ids")?;
        let mut written = OutScalar(0u64);
        let mut total = OutScalar(0u64);
        // SAFETY: live store and filter; ids holds cap aligned places; the
        // two counts are valid places.
        check(unsafe {
            sys::mnemo_store_select(
                self.raw(),
                handle.as_ptr(),
                offset,
                cap as u64,
                ids_ptr,
                &mut written.0,
                &mut total.0,
            )
        })?;
        let n = (written.0 as usize).min(cap);
        Ok(Selection {
            ids: ids[..n].to_vec(),
            total: total.0,
        })
    }

    /// The namespaces the store's memories hold, each with how many
    /// memories hold exactly it.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Fields, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add_with_fields(&AlignedVec::from_slice(&[1u64, 2, 3]), &AlignedVec::from_slice(&[1.0; 3]), &[
    ///     Fields::new().namespace(["users", "1"]),
    ///     Fields::new().namespace(["users", "1"]),
    ///     Fields::new(),
    /// ])?;
    /// let ns = store.namespaces()?;
    /// assert_eq!(ns.len(), 1);
    /// assert_eq!((ns[0].path.join("/"), ns[0].memories), ("users/1".to_string(), 2));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn namespaces(&self) -> Result<Vec<NamespaceUse>> {
        let mut out: *mut sys::mnemo_namespaces = std::ptr::null_mut();
        // SAFETY: live store, valid out place.
        check(unsafe { sys::mnemo_store_namespaces(self.raw(), &mut out) })?;
        let list = Namespaces(NonNull::new(out).ok_or_else(|| {
            Error::new(Status::Internal, "the library returned OK without a list")
        })?);
        // SAFETY: live list.
        let n = unsafe { sys::mnemo_namespaces_count(list.0.as_ptr()) };
        let mut result = Vec::with_capacity(n as usize);
        for i in 0..n {
            let mut parts: *const *const c_char = std::ptr::null();
            let mut depth = 0u32;
            let mut memories = 0u64;
            // SAFETY: live list; i < count; every out is a valid place.
            check(unsafe {
                sys::mnemo_namespaces_get(list.0.as_ptr(), i, &mut parts, &mut depth, &mut memories)
            })?;
            result.push(NamespaceUse {
                // SAFETY: parts holds depth strings owned by `list`.
                path: unsafe { texts(parts, depth) },
                memories,
            });
        }
        Ok(result)
    }

    /// Lays the memories out by namespace (`mnemo_store_cluster`): each
    /// namespace's memories, with those under it, become one run of rows,
    /// so that a search scoped to it reads just that run. Results do not
    /// change. Memories added later go to the end: call it again after many
    /// adds. A snapshot keeps the order; it is not journaled.
    ///
    /// ```
    /// # use mnemo::{AlignedVec, Fields, Metric, Runtime, Store};
    /// # let store = Store::<f32>::new(&Runtime::builder().cpu().build()?, 1, Metric::Dot)?;
    /// store.add_with_fields(&AlignedVec::from_slice(&[1u64, 2, 3]), &AlignedVec::from_slice(&[1.0, 2.0, 3.0]), &[
    ///     Fields::new().namespace(["users", "1"]),
    ///     Fields::new().namespace(["users", "2"]),
    ///     Fields::new().namespace(["users", "1"]),
    /// ])?;
    /// store.cluster()?;
    /// let ns = store.namespaces()?;
    /// assert_eq!((ns[0].memories, ns[1].memories), (2, 1));
    /// # Ok::<(), mnemo::Error>(())
    /// ```
    pub fn cluster(&self) -> Result<()> {
        // SAFETY: live store.
        check(unsafe { sys::mnemo_store_cluster(self.raw()) })
    }
}
