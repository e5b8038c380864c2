//! Filter expressions over what memories hold ([`Where`]): which memories a
//! search ([`SearchOptions::where_`](crate::SearchOptions::where_)) or a
//! selection ([`Store::select`](crate::Store::select)) may return.

use std::ffi::CString;
use std::fmt;
use std::os::raw::c_char;
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::aligned::{in_ptr, AlignedVec};
use crate::error::{check, Error, Result, Status};
use crate::fields::{c_string, Value, ValueArena};
use crate::sys;

/// A filter expression: AND / OR / NOT over predicates on a memory's
/// namespace, tags, attributes, key, id, last-access time and importance.
///
/// A predicate on a field a memory lacks is false for it (so a scoped search
/// never returns a memory outside its scope, whatever it lacks), and
/// [`Where::not`] turns that into true. Attribute comparisons follow the
/// value kinds: integers and doubles compare with each other as numbers
/// (exactly), strings bytewise, booleans only by equality (`eq`, `ne`,
/// `is_in`, `not_in`; an ordered comparison of a boolean is refused), and
/// values of different kinds never compare (the predicate is false).
/// `ne` and `not_in` need the attribute to be present.
///
/// The expression is a plain Rust value (clone it, compare it, print it);
/// the first search or selection that uses it builds the library's filter
/// once and keeps it, so reusing a `Where` costs nothing more.
///
/// ```
/// use mnemo::Where;
/// let recent_news = Where::attr("year").ge(2020)
///     & (Where::attr("lang").eq("en") | Where::tags_any(["news"]))
///     & Where::namespace_under(["users", "42"])
///     & !Where::key("draft");
/// let same = Where::attr("year")
///     .ge(2020)
///     .and(Where::attr("lang").eq("en").or(Where::tags_any(["news"])))
///     .and(Where::namespace_under(["users", "42"]))
///     .and(Where::key("draft").not());
/// assert_eq!(recent_news, same);
/// ```
pub struct Where {
    node: Node,
    // The library's filter, built on first use (see `handle`).
    compiled: OnceLock<FilterHandle>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Namespace {
        under: bool,
        parts: Vec<String>,
    },
    Tags {
        all: bool,
        tags: Vec<String>,
    },
    Attr {
        name: String,
        op: Op,
        values: Vec<Value>,
    },
    Keys(Vec<String>),
    Ids(Vec<u64>),
    Time(f64, f64),
    Importance(f64, f64),
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
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

impl Op {
    fn code(self) -> i32 {
        (match self {
            Op::Eq => sys::MNEMO_OP_EQ,
            Op::Ne => sys::MNEMO_OP_NE,
            Op::Lt => sys::MNEMO_OP_LT,
            Op::Le => sys::MNEMO_OP_LE,
            Op::Gt => sys::MNEMO_OP_GT,
            Op::Ge => sys::MNEMO_OP_GE,
            Op::In => sys::MNEMO_OP_IN,
            Op::NotIn => sys::MNEMO_OP_NOT_IN,
            Op::Between => sys::MNEMO_OP_BETWEEN,
            Op::Exists => sys::MNEMO_OP_EXISTS,
        }) as i32
    }
}

fn strings<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items.into_iter().map(Into::into).collect()
}

impl Where {
    fn from_node(node: Node) -> Where {
        Where {
            node,
            compiled: OnceLock::new(),
        }
    }

    /// Every memory (an AND of nothing).
    ///
    /// ```
    /// assert_eq!(mnemo::Where::all(), mnemo::Where::all_of([]));
    /// ```
    pub fn all() -> Where {
        Where::from_node(Node::And(Vec::new()))
    }

    /// No memory (an OR of nothing).
    ///
    /// ```
    /// assert_eq!(mnemo::Where::nothing(), mnemo::Where::any_of([]));
    /// ```
    pub fn nothing() -> Where {
        Where::from_node(Node::Or(Vec::new()))
    }

    /// Memories whose namespace is exactly `parts`.
    ///
    /// ```
    /// let w = mnemo::Where::namespace(["users", "42", "episodic"]);
    /// ```
    pub fn namespace<I, S>(parts: I) -> Where
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Where::from_node(Node::Namespace {
            under: false,
            parts: strings(parts),
        })
    }

    /// Memories whose namespace is `parts` or below it (starts with these
    /// parts); no parts: every memory that has a namespace.
    ///
    /// ```
    /// let user = mnemo::Where::namespace_under(["users", "42"]);
    /// ```
    pub fn namespace_under<I, S>(parts: I) -> Where
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Where::from_node(Node::Namespace {
            under: true,
            parts: strings(parts),
        })
    }

    /// Memories holding at least one of the tags (none given: nothing).
    ///
    /// ```
    /// let w = mnemo::Where::tags_any(["news", "sports"]);
    /// ```
    pub fn tags_any<I, S>(tags: I) -> Where
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Where::from_node(Node::Tags {
            all: false,
            tags: strings(tags),
        })
    }

    /// Memories holding every one of the tags (none given: every memory).
    ///
    /// ```
    /// let w = mnemo::Where::tags_all(["news", "sports"]);
    /// ```
    pub fn tags_all<I, S>(tags: I) -> Where
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Where::from_node(Node::Tags {
            all: true,
            tags: strings(tags),
        })
    }

    /// Memories holding the tag.
    ///
    /// ```
    /// assert_eq!(mnemo::Where::tag("news"), mnemo::Where::tags_any(["news"]));
    /// ```
    pub fn tag(tag: impl Into<String>) -> Where {
        Where::tags_any([tag.into()])
    }

    /// A predicate on the attribute `name`, completed by one of [`Attr`]'s
    /// comparisons.
    ///
    /// ```
    /// let w = mnemo::Where::attr("year").between(2010, 2019);
    /// ```
    pub fn attr(name: impl Into<String>) -> Attr {
        Attr { name: name.into() }
    }

    /// Memories holding any of the keys.
    ///
    /// ```
    /// let w = mnemo::Where::keys(["doc-1", "doc-2"]);
    /// ```
    pub fn keys<I, S>(keys: I) -> Where
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Where::from_node(Node::Keys(strings(keys)))
    }

    /// The memory holding the key.
    ///
    /// ```
    /// assert_eq!(mnemo::Where::key("doc-1"), mnemo::Where::keys(["doc-1"]));
    /// ```
    pub fn key(key: impl Into<String>) -> Where {
        Where::keys([key.into()])
    }

    /// Memories with any of the ids (ids not in the store are ignored).
    ///
    /// ```
    /// let w = mnemo::Where::ids([1, 2, 3]);
    /// ```
    pub fn ids(ids: impl IntoIterator<Item = u64>) -> Where {
        Where::from_node(Node::Ids(ids.into_iter().collect()))
    }

    /// Memories whose last-access time lies in `[lo, hi]` (an infinite end
    /// is open; a NaN bound is refused when the filter is used).
    ///
    /// ```
    /// let last_hour = mnemo::Where::time(1.7e9 - 3600.0, f64::INFINITY);
    /// ```
    pub fn time(lo: f64, hi: f64) -> Where {
        Where::from_node(Node::Time(lo, hi))
    }

    /// Memories whose importance lies in `[lo, hi]` (as [`Where::time`]).
    ///
    /// ```
    /// let important = mnemo::Where::importance(0.8, f64::INFINITY);
    /// ```
    pub fn importance(lo: f64, hi: f64) -> Where {
        Where::from_node(Node::Importance(lo, hi))
    }

    /// Memories every one of the expressions matches (none: every memory).
    ///
    /// ```
    /// use mnemo::Where;
    /// let w = Where::all_of([Where::tag("a"), Where::tag("b"), Where::tag("c")]);
    /// assert_eq!(w, Where::tag("a") & Where::tag("b") & Where::tag("c"));
    /// ```
    pub fn all_of(items: impl IntoIterator<Item = Where>) -> Where {
        items.into_iter().fold(Where::all(), Where::and)
    }

    /// Memories at least one of the expressions matches (none: nothing).
    ///
    /// ```
    /// use mnemo::Where;
    /// let w = Where::any_of([Where::tag("a"), Where::tag("b")]);
    /// assert_eq!(w, Where::tag("a") | Where::tag("b"));
    /// ```
    pub fn any_of(items: impl IntoIterator<Item = Where>) -> Where {
        items.into_iter().fold(Where::nothing(), Where::or)
    }

    /// Both this and `other` (also `self & other`). Chains flatten into one
    /// AND, so a long chain does not nest.
    ///
    /// ```
    /// use mnemo::Where;
    /// let w = Where::attr("year").ge(2020).and(Where::tag("news"));
    /// ```
    pub fn and(self, other: Where) -> Where {
        let mut parts = match self.node {
            Node::And(v) => v,
            n => vec![n],
        };
        match other.node {
            Node::And(v) => parts.extend(v),
            n => parts.push(n),
        }
        Where::from_node(Node::And(parts))
    }

    /// This or `other` (also `self | other`); chains flatten as for
    /// [`Where::and`].
    ///
    /// ```
    /// use mnemo::Where;
    /// let w = Where::tag("news").or(Where::tag("sports"));
    /// ```
    pub fn or(self, other: Where) -> Where {
        let mut parts = match self.node {
            Node::Or(v) => v,
            n => vec![n],
        };
        match other.node {
            Node::Or(v) => parts.extend(v),
            n => parts.push(n),
        }
        Where::from_node(Node::Or(parts))
    }

    /// Every memory this does not match (also `!self`), including those
    /// lacking the fields it tests.
    ///
    /// ```
    /// use mnemo::Where;
    /// let untagged_or_other = Where::tag("news").not();
    /// ```
    #[allow(clippy::should_implement_trait)] // it is implemented too: ops::Not
    pub fn not(self) -> Where {
        Where::from_node(Node::Not(Box::new(self.node)))
    }

    /// The library's filter for this expression, built on first use.
    pub(crate) fn handle(&self) -> Result<&FilterHandle> {
        if let Some(h) = self.compiled.get() {
            return Ok(h);
        }
        let built = FilterHandle::build(&self.node)?;
        // Another thread may have built it meanwhile; either copy will do.
        let _ = self.compiled.set(built);
        Ok(self.compiled.get().expect("set above"))
    }
}

impl Clone for Where {
    fn clone(&self) -> Self {
        Where::from_node(self.node.clone())
    }
}

impl PartialEq for Where {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node
    }
}

impl fmt::Debug for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.node.fmt(f)
    }
}

impl std::ops::BitAnd for Where {
    type Output = Where;
    fn bitand(self, rhs: Where) -> Where {
        self.and(rhs)
    }
}

impl std::ops::BitOr for Where {
    type Output = Where;
    fn bitor(self, rhs: Where) -> Where {
        self.or(rhs)
    }
}

impl std::ops::Not for Where {
    type Output = Where;
    fn not(self) -> Where {
        Where::not(self)
    }
}

/// The attribute half of a predicate (from [`Where::attr`]); each method
/// completes it with a comparison. Operands are anything that converts into
/// a [`Value`]: integers, `f64`/`f32`, `bool`, `&str`, `String`.
///
/// ```
/// use mnemo::Where;
/// let w = Where::attr("lang").is_in(["en", "de"]) & Where::attr("score").gt(0.5);
/// let flagged = Where::attr("ok").eq(true);
/// let has_year = Where::attr("year").exists();
/// ```
#[derive(Debug, Clone)]
#[must_use = "an attribute name alone filters nothing: add a comparison"]
pub struct Attr {
    name: String,
}

impl Attr {
    fn with(self, op: Op, values: Vec<Value>) -> Where {
        Where::from_node(Node::Attr {
            name: self.name,
            op,
            values,
        })
    }

    /// Equal to `v` (numbers compare across INT and DOUBLE).
    #[allow(clippy::should_implement_trait)] // a predicate, not a comparison
    pub fn eq(self, v: impl Into<Value>) -> Where {
        self.with(Op::Eq, vec![v.into()])
    }

    /// Present and not equal to `v`.
    #[allow(clippy::should_implement_trait)]
    pub fn ne(self, v: impl Into<Value>) -> Where {
        self.with(Op::Ne, vec![v.into()])
    }

    /// Less than `v` (numbers, or strings bytewise).
    pub fn lt(self, v: impl Into<Value>) -> Where {
        self.with(Op::Lt, vec![v.into()])
    }

    /// At most `v`.
    pub fn le(self, v: impl Into<Value>) -> Where {
        self.with(Op::Le, vec![v.into()])
    }

    /// Greater than `v`.
    pub fn gt(self, v: impl Into<Value>) -> Where {
        self.with(Op::Gt, vec![v.into()])
    }

    /// At least `v`.
    pub fn ge(self, v: impl Into<Value>) -> Where {
        self.with(Op::Ge, vec![v.into()])
    }

    /// Equal to one of the values (none: nothing).
    pub fn is_in<I, V>(self, values: I) -> Where
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        self.with(Op::In, values.into_iter().map(Into::into).collect())
    }

    /// Present and equal to none of the values.
    pub fn not_in<I, V>(self, values: I) -> Where
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        self.with(Op::NotIn, values.into_iter().map(Into::into).collect())
    }

    /// In `[lo, hi]`: two numbers or two strings.
    pub fn between(self, lo: impl Into<Value>, hi: impl Into<Value>) -> Where {
        self.with(Op::Between, vec![lo.into(), hi.into()])
    }

    /// Present, whatever its value.
    pub fn exists(self) -> Where {
        self.with(Op::Exists, Vec::new())
    }
}

/// An owned `mnemo_filter`, destroyed on drop.
pub(crate) struct FilterHandle(NonNull<sys::mnemo_filter>);

// SAFETY: a filter is plain memory owned by this handle; mnemo.h lets any
// number of searches read a built filter at once, and it is only changed
// while being built, through `&mut self`, before it is shared.
unsafe impl Send for FilterHandle {}
// SAFETY: see Send; shared references only pass it to reading calls.
unsafe impl Sync for FilterHandle {}

impl Drop for FilterHandle {
    fn drop(&mut self) {
        // SAFETY: created by mnemo_filter_create, destroyed once.
        unsafe { sys::mnemo_filter_destroy(self.0.as_ptr()) }
    }
}

impl FilterHandle {
    fn build(node: &Node) -> Result<FilterHandle> {
        let mut out: *mut sys::mnemo_filter = std::ptr::null_mut();
        // SAFETY: out is a valid place.
        check(unsafe { sys::mnemo_filter_create(&mut out) })?;
        let handle = FilterHandle(NonNull::new(out).ok_or_else(|| {
            Error::new(Status::Internal, "the library returned OK without a filter")
        })?);
        let root = handle.emit(node)?;
        // SAFETY: live filter, root is a node it holds.
        check(unsafe { sys::mnemo_filter_set_root(handle.0.as_ptr(), root) })?;
        Ok(handle)
    }

    pub(crate) fn as_ptr(&self) -> *const sys::mnemo_filter {
        self.0.as_ptr()
    }

    /// Appends `node` (children first) and returns its number.
    fn emit(&self, node: &Node) -> Result<u32> {
        let f = self.0.as_ptr();
        let mut out = 0u32;
        let status = match node {
            Node::Namespace { under, parts } => {
                let (_keep, ptrs) = c_strings(parts, "namespace part")?;
                let op = if *under {
                    sys::MNEMO_OP_NAMESPACE_UNDER
                } else {
                    sys::MNEMO_OP_NAMESPACE_EQ
                };
                let depth = count_u32(ptrs.len(), "namespace parts")?;
                // SAFETY: live filter; ptrs holds depth NUL-terminated
                // strings kept alive by _keep; out is a valid place.
                unsafe { sys::mnemo_filter_namespace(f, op as i32, ptrs.as_ptr(), depth, &mut out) }
            }
            Node::Tags { all, tags } => {
                let (_keep, ptrs) = c_strings(tags, "tag")?;
                let op = if *all {
                    sys::MNEMO_OP_ALL
                } else {
                    sys::MNEMO_OP_ANY
                };
                let count = count_u32(ptrs.len(), "tags")?;
                // SAFETY: as for the namespace.
                unsafe { sys::mnemo_filter_tags(f, op as i32, ptrs.as_ptr(), count, &mut out) }
            }
            Node::Attr { name, op, values } => {
                let name = c_string(name, "attribute name")?;
                let mut arena = ValueArena::default();
                let raw = values
                    .iter()
                    .map(|v| arena.value(v, "attribute operand"))
                    .collect::<Result<Vec<_>>>()?;
                let count = count_u32(raw.len(), "attribute operands")?;
                // SAFETY: live filter; name is NUL-terminated; raw holds
                // count values whose strings the arena keeps alive.
                unsafe {
                    sys::mnemo_filter_attribute(
                        f,
                        name.as_ptr(),
                        op.code(),
                        raw.as_ptr(),
                        count,
                        &mut out,
                    )
                }
            }
            Node::Keys(keys) => {
                let (_keep, ptrs) = c_strings(keys, "key")?;
                // SAFETY: as for the namespace.
                unsafe { sys::mnemo_filter_keys(f, ptrs.as_ptr(), ptrs.len() as u64, &mut out) }
            }
            Node::Ids(ids) => {
                // The library wants id arrays 16-byte aligned.
                let ids = AlignedVec::from_slice(ids);
                let ptr = in_ptr(&ids, "ids")?;
                // SAFETY: live filter; ptr holds ids.len() aligned ids.
                unsafe { sys::mnemo_filter_ids(f, ptr, ids.len() as u64, &mut out) }
            }
            // SAFETY: live filter, valid out place.
            Node::Time(lo, hi) => unsafe { sys::mnemo_filter_time(f, *lo, *hi, &mut out) },
            // SAFETY: live filter, valid out place.
            Node::Importance(lo, hi) => unsafe {
                sys::mnemo_filter_importance(f, *lo, *hi, &mut out)
            },
            Node::And(children) | Node::Or(children) => {
                let ids = children
                    .iter()
                    .map(|c| self.emit(c))
                    .collect::<Result<Vec<u32>>>()?;
                let count = count_u32(ids.len(), "children")?;
                // SAFETY: live filter; ids holds count node numbers.
                unsafe {
                    if matches!(node, Node::And(_)) {
                        sys::mnemo_filter_and(f, ids.as_ptr(), count, &mut out)
                    } else {
                        sys::mnemo_filter_or(f, ids.as_ptr(), count, &mut out)
                    }
                }
            }
            Node::Not(child) => {
                let c = self.emit(child)?;
                // SAFETY: live filter, valid out place.
                unsafe { sys::mnemo_filter_not(f, c, &mut out) }
            }
        };
        check(status)?;
        Ok(out)
    }
}

fn count_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("filter: too many {what} ({n})")))
}

/// NUL-terminated copies of `items` and the pointer array to pass to C (the
/// copies must outlive the call).
fn c_strings(items: &[String], what: &str) -> Result<(Vec<CString>, Vec<*const c_char>)> {
    let owned = items
        .iter()
        .map(|s| c_string(s, what))
        .collect::<Result<Vec<_>>>()?;
    let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
    Ok((owned, ptrs))
}
