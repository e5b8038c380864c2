//! A growable buffer whose data is always 16-byte aligned, and the pointer
//! checks every call into the library goes through.

use std::alloc::{self, Layout};
use std::fmt;
use std::mem;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::error::{Error, Result, Status};

/// Alignment in bytes that mnemo requires of every data pointer.
///
/// ```
/// let v = mnemo::AlignedVec::from_slice(&[1.0f32; 3]);
/// assert_eq!(v.as_ptr() as usize % mnemo::ALIGNMENT, 0);
/// ```
pub const ALIGNMENT: usize = crate::sys::MNEMO_ALIGNMENT as usize;

/// A `Vec`-like buffer of `Copy` elements whose data pointer is always
/// 16-byte aligned, as mnemo requires of every input and output.
///
/// A plain `Vec<f32>` is only 4-byte aligned, so the library (and this crate,
/// before calling it) may refuse it with [`Status::Misaligned`].
///
/// ```
/// use mnemo::AlignedVec;
/// let mut v: AlignedVec<f32> = (0..5).map(|i| i as f32).collect();
/// v.push(5.0);
/// assert_eq!(v.len(), 6);
/// assert_eq!(v.as_ptr() as usize % 16, 0);
/// assert_eq!(&v[..3], &[0.0, 1.0, 2.0]);
/// ```
pub struct AlignedVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: AlignedVec owns its buffer exclusively, like Vec<T>; sending it or
// sharing `&AlignedVec` is as safe as doing so with the elements.
unsafe impl<T: Copy + Send> Send for AlignedVec<T> {}
// SAFETY: shared access only hands out `&[T]`, which is Sync when T is.
unsafe impl<T: Copy + Sync> Sync for AlignedVec<T> {}

impl<T: Copy> AlignedVec<T> {
    /// An empty buffer; allocates nothing.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::<f32>::new();
    /// assert!(v.is_empty());
    /// ```
    pub fn new() -> Self {
        AlignedVec {
            ptr: Self::dangling(),
            len: 0,
            cap: if mem::size_of::<T>() == 0 {
                usize::MAX
            } else {
                0
            },
        }
    }

    /// An empty buffer with room for `capacity` elements.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::<u64>::with_capacity(10);
    /// assert!(v.capacity() >= 10);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        let mut v = Self::new();
        v.reserve(capacity);
        v
    }

    /// `len` copies of `value`.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::from_elem(0.5f32, 3);
    /// assert_eq!(&v[..], &[0.5, 0.5, 0.5]);
    /// ```
    pub fn from_elem(value: T, len: usize) -> Self {
        let mut v = Self::with_capacity(len);
        for i in 0..len {
            // SAFETY: reserve made room for len elements.
            unsafe { v.ptr.as_ptr().add(i).write(value) };
        }
        v.len = len;
        v
    }

    /// A copy of `items`.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::from_slice(&[1u32, 2, 3]);
    /// assert_eq!(v.as_ptr() as usize % 16, 0);
    /// ```
    pub fn from_slice(items: &[T]) -> Self {
        let mut v = Self::with_capacity(items.len());
        v.extend_from_slice(items);
        v
    }

    /// Number of elements.
    ///
    /// ```
    /// assert_eq!(mnemo::AlignedVec::from_slice(&[1u8, 2]).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    ///
    /// ```
    /// assert!(mnemo::AlignedVec::<f32>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements that fit without reallocating.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::<f32>::with_capacity(4);
    /// assert!(v.capacity() >= 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The elements as a slice.
    ///
    /// ```
    /// let v = mnemo::AlignedVec::from_slice(&[1.0f32]);
    /// assert_eq!(v.as_slice(), &[1.0]);
    /// ```
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: ptr is non-null, aligned and valid for len initialised
        // elements (dangling but aligned when len is 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements as a mutable slice.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::from_slice(&[1.0f32]);
    /// v.as_mut_slice()[0] = 2.0;
    /// assert_eq!(v[0], 2.0);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in as_slice, and &mut self makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Makes room for at least `additional` more elements.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::<f32>::new();
    /// v.reserve(100);
    /// assert!(v.capacity() >= 100);
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        let needed = self
            .len
            .checked_add(additional)
            .expect("AlignedVec capacity overflow");
        if needed <= self.cap {
            return;
        }
        let new_cap = needed.max(self.cap.saturating_mul(2)).max(4);
        let new_layout = Self::layout(new_cap);
        // SAFETY: new_layout has a non-zero size (T is not zero-sized here,
        // since then cap is usize::MAX); the old block, if any, was allocated
        // with Self::layout(self.cap).
        let raw = unsafe {
            if self.cap == 0 {
                alloc::alloc(new_layout)
            } else {
                alloc::realloc(
                    self.ptr.as_ptr().cast(),
                    Self::layout(self.cap),
                    new_layout.size(),
                )
            }
        };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            alloc::handle_alloc_error(new_layout);
        };
        self.ptr = ptr;
        self.cap = new_cap;
    }

    /// Appends one element.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::new();
    /// v.push(7u64);
    /// assert_eq!(&v[..], &[7]);
    /// ```
    pub fn push(&mut self, value: T) {
        self.reserve(1);
        // SAFETY: reserve guarantees room for one more element.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Appends copies of `items`.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::from_slice(&[1i32]);
    /// v.extend_from_slice(&[2, 3]);
    /// assert_eq!(&v[..], &[1, 2, 3]);
    /// ```
    pub fn extend_from_slice(&mut self, items: &[T]) {
        self.reserve(items.len());
        // SAFETY: room for items.len() more elements was reserved; the source
        // is a distinct borrow, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                items.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                items.len(),
            );
        }
        self.len += items.len();
    }

    /// Shortens to `len` elements; does nothing if already shorter.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::from_slice(&[1, 2, 3]);
    /// v.truncate(1);
    /// assert_eq!(&v[..], &[1]);
    /// ```
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Removes every element, keeping the allocation.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::from_slice(&[1, 2]);
    /// v.clear();
    /// assert!(v.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Grows or shrinks to `len`, filling new slots with `value`.
    ///
    /// ```
    /// let mut v = mnemo::AlignedVec::from_slice(&[1.0f32]);
    /// v.resize(3, 0.0);
    /// assert_eq!(&v[..], &[1.0, 0.0, 0.0]);
    /// ```
    pub fn resize(&mut self, len: usize, value: T) {
        if len <= self.len {
            self.truncate(len);
            return;
        }
        self.reserve(len - self.len);
        while self.len < len {
            // SAFETY: capacity covers len elements.
            unsafe { self.ptr.as_ptr().add(self.len).write(value) };
            self.len += 1;
        }
    }

    /// Copies the elements into a plain `Vec` (which is not 16-byte aligned).
    ///
    /// ```
    /// let v = mnemo::AlignedVec::from_slice(&[1, 2]);
    /// assert_eq!(v.to_vec(), vec![1, 2]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }

    fn dangling() -> NonNull<T> {
        // An aligned, non-null address that is never dereferenced for len 0.
        let align = Self::align();
        NonNull::new(align as *mut T).expect("alignment is non-zero")
    }

    fn align() -> usize {
        ALIGNMENT.max(mem::align_of::<T>())
    }

    fn layout(cap: usize) -> Layout {
        let size = mem::size_of::<T>()
            .checked_mul(cap)
            .expect("AlignedVec capacity overflow");
        Layout::from_size_align(size, Self::align()).expect("AlignedVec layout")
    }
}

impl<T: Copy> Drop for AlignedVec<T> {
    fn drop(&mut self) {
        if self.cap != 0 && mem::size_of::<T>() != 0 {
            // SAFETY: the block was allocated with exactly this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), Self::layout(self.cap)) };
        }
    }
}

impl<T: Copy> Default for AlignedVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> Deref for AlignedVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy> DerefMut for AlignedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Copy> Clone for AlignedVec<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for AlignedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy + PartialEq> PartialEq for AlignedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy> FromIterator<T> for AlignedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::new();
        v.extend(iter);
        v
    }
}

impl<T: Copy> Extend<T> for AlignedVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for item in iter {
            self.push(item);
        }
    }
}

impl<T: Copy> From<&[T]> for AlignedVec<T> {
    fn from(items: &[T]) -> Self {
        Self::from_slice(items)
    }
}

impl<T: Copy> From<Vec<T>> for AlignedVec<T> {
    fn from(items: Vec<T>) -> Self {
        Self::from_slice(&items)
    }
}

impl<T: Copy> AsRef<[T]> for AlignedVec<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: Copy> AsMut<[T]> for AlignedVec<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<'a, T: Copy> IntoIterator for &'a AlignedVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Backing store for the pointer handed to C for an empty slice: a real,
/// aligned address, so a library that checks pointers before counts still
/// accepts it. Nothing is ever read or written through it (the count is 0).
#[repr(C, align(16))]
struct EmptyBlock([u8; 16]);
static EMPTY: EmptyBlock = EmptyBlock([0; 16]);

/// A scalar out-parameter on a 16-byte boundary. The library checks the
/// alignment of some of these (the `removed` count of mnemo_store_remove), so
/// every scalar out goes through this rather than a bare local.
#[repr(C, align(16))]
#[derive(Default)]
pub(crate) struct OutScalar<T>(pub(crate) T);

fn misaligned(what: &str, addr: usize) -> Error {
    Error::new(
        Status::Misaligned,
        format!(
            "{what}: address {addr:#x} is not {ALIGNMENT}-byte aligned; allocate it with mnemo::AlignedVec"
        ),
    )
}

/// The pointer to pass to C for an input slice, after checking alignment.
pub(crate) fn in_ptr<T>(data: &[T], what: &str) -> Result<*const T> {
    if data.is_empty() {
        return Ok(std::ptr::addr_of!(EMPTY).cast());
    }
    let addr = data.as_ptr() as usize;
    if !addr.is_multiple_of(ALIGNMENT) {
        return Err(misaligned(what, addr));
    }
    Ok(data.as_ptr())
}

/// The pointer to pass to C for an optional input of `count` entries: its
/// length and alignment checked, or NULL when absent (as the header allows).
pub(crate) fn opt_in_ptr<T>(data: Option<&[T]>, count: usize, what: &str) -> Result<*const T> {
    match data {
        Some(d) => {
            expect_len(d.len(), count, what)?;
            in_ptr(d, what)
        }
        None => Ok(std::ptr::null()),
    }
}

/// The pointer to pass to C for an output slice, after checking alignment.
pub(crate) fn out_ptr<T>(data: &mut [T], what: &str) -> Result<*mut T> {
    if data.is_empty() {
        // C writes nothing for a zero count; see EmptyBlock.
        return Ok(std::ptr::addr_of!(EMPTY).cast_mut().cast());
    }
    let addr = data.as_ptr() as usize;
    if !addr.is_multiple_of(ALIGNMENT) {
        return Err(misaligned(what, addr));
    }
    Ok(data.as_mut_ptr())
}

/// `rows * cols` without overflow.
pub(crate) fn product(rows: usize, cols: usize, what: &str) -> Result<usize> {
    rows.checked_mul(cols).ok_or_else(|| Error::overflow(what))
}

/// Rows in a flat `[rows x dim]` slice; `dim` must be at least 1 and divide
/// the length.
pub(crate) fn rows_of(len: usize, dim: usize, what: &str) -> Result<usize> {
    if dim == 0 {
        return Err(Error::invalid(format!("{what}: dim must be at least 1")));
    }
    if !len.is_multiple_of(dim) {
        return Err(Error::shape(format!(
            "{what}: length {len} is not a multiple of dim {dim}"
        )));
    }
    Ok(len / dim)
}

/// Checks that a slice has exactly `expected` elements.
pub(crate) fn expect_len(len: usize, expected: usize, what: &str) -> Result<()> {
    if len != expected {
        return Err(Error::shape(format!(
            "{what}: has {len} elements, expected {expected}"
        )));
    }
    Ok(())
}
