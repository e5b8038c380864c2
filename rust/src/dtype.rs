//! Element types: the f16/bf16 storage newtypes, the dtype codes and the
//! traits that tie Rust types to them.

use std::fmt;

use crate::sys;

/// Element types understood by mnemo (`enum mnemo_dtype`).
///
/// ```
/// use mnemo::{DType, Element, F16};
/// assert_eq!(F16::DTYPE, DType::F16);
/// assert_eq!(DType::F16.size(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the upper half of a binary32.
    Bf16,
    /// IEEE 754 binary64 (resampling times only).
    F64,
    /// 32-bit unsigned (pair indices only).
    U32,
    /// 64-bit unsigned (pair indices only).
    U64,
}

impl DType {
    /// The `mnemo_dtype` value.
    ///
    /// ```
    /// assert_eq!(mnemo::DType::Bf16.code(), 3);
    /// ```
    pub fn code(self) -> i32 {
        let code = match self {
            DType::F32 => sys::MNEMO_DTYPE_F32,
            DType::F16 => sys::MNEMO_DTYPE_F16,
            DType::Bf16 => sys::MNEMO_DTYPE_BF16,
            DType::F64 => sys::MNEMO_DTYPE_F64,
            DType::U32 => sys::MNEMO_DTYPE_U32,
            DType::U64 => sys::MNEMO_DTYPE_U64,
        };
        code as i32
    }

    /// The dtype of a `mnemo_dtype` value, if known.
    ///
    /// ```
    /// assert_eq!(mnemo::DType::from_code(1), Some(mnemo::DType::F32));
    /// assert_eq!(mnemo::DType::from_code(0), None);
    /// ```
    pub fn from_code(code: i32) -> Option<DType> {
        [
            DType::F32,
            DType::F16,
            DType::Bf16,
            DType::F64,
            DType::U32,
            DType::U64,
        ]
        .into_iter()
        .find(|d| d.code() == code)
    }

    /// Size of one element in bytes.
    ///
    /// ```
    /// assert_eq!(mnemo::DType::F64.size(), 8);
    /// ```
    pub fn size(self) -> usize {
        match self {
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::U32 => 4,
            DType::F64 | DType::U64 => 8,
        }
    }
}

/// IEEE 754 binary16, stored as its bit pattern.
///
/// Conversion from `f32` rounds to nearest, ties to even, as the library does
/// when it stores f32 input in an f16 store.
///
/// ```
/// use mnemo::F16;
/// let h = F16::from_f32(1.0 / 3.0);
/// assert_eq!(h.to_bits(), 0x3555);
/// assert_eq!(F16::from_f32(65520.0).to_f32(), f32::INFINITY); // rounds up past the max
/// assert_eq!(F16::from_bits(0x3c00).to_f32(), 1.0);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct F16(pub u16);

impl F16 {
    /// Wraps a bit pattern.
    ///
    /// ```
    /// assert_eq!(mnemo::F16::from_bits(0xc000).to_f32(), -2.0);
    /// ```
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }

    /// The bit pattern.
    ///
    /// ```
    /// assert_eq!(mnemo::F16::from_f32(1.0).to_bits(), 0x3c00);
    /// ```
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// Rounds an `f32` to the nearest binary16 (ties to even); overflow gives
    /// infinity and NaN stays NaN.
    ///
    /// ```
    /// use mnemo::F16;
    /// // 1 + 2^-11 lies halfway between 1 and the next f16: ties go to even.
    /// assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11)).to_f32(), 1.0);
    /// assert_eq!(F16::from_f32(2f32.powi(-24)).to_bits(), 1); // smallest subnormal
    /// ```
    pub fn from_f32(value: f32) -> F16 {
        let bits = value.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32;
        let man = bits & 0x007f_ffff;
        if exp == 0xff {
            if man == 0 {
                return F16(sign | 0x7c00);
            }
            // Quiet NaN keeping the top payload bits.
            return F16(sign | 0x7e00 | (man >> 13) as u16);
        }
        // Exponent re-biased for binary16 (bias 15 instead of 127).
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            // Subnormal result: value / 2^-24 with the implicit bit restored.
            let shift = 14 - e;
            if shift > 24 {
                return F16(sign);
            }
            let m = man | 0x0080_0000;
            return F16(sign | round_shift(m, shift as u32) as u16);
        }
        // Normal: a carry out of the mantissa correctly bumps the exponent
        // (and gives infinity past the largest finite value).
        let r = ((e as u32) << 10) | (man >> 13);
        let rem = man & 0x1fff;
        let r = if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
            r + 1
        } else {
            r
        };
        F16(sign | r as u16)
    }

    /// The exact `f32` value.
    ///
    /// ```
    /// assert_eq!(mnemo::F16::from_bits(0x0001).to_f32(), 2f32.powi(-24));
    /// ```
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = match exp {
            0 => {
                // Zero or subnormal: man * 2^-24 is exact in f32.
                let magnitude = man as f32 * f32::from_bits(0x3380_0000);
                sign | magnitude.to_bits()
            }
            0x1f => sign | 0x7f80_0000 | (man << 13),
            _ => sign | ((exp + 112) << 23) | (man << 13),
        };
        f32::from_bits(bits)
    }
}

/// `m >> shift` rounded to nearest, ties to even (1 <= shift <= 31).
fn round_shift(m: u32, shift: u32) -> u32 {
    let r = m >> shift;
    let rem = m & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    if rem > half || (rem == half && r & 1 == 1) {
        r + 1
    } else {
        r
    }
}

/// bfloat16 (the upper 16 bits of a binary32), stored as its bit pattern.
///
/// Conversion from `f32` rounds to nearest, ties to even.
///
/// ```
/// use mnemo::Bf16;
/// assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3f80);
/// assert_eq!(Bf16::from_f32(3.0).to_f32(), 3.0);
/// assert_eq!(Bf16::from_bits(0x4049).to_f32(), 3.140625);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Wraps a bit pattern.
    ///
    /// ```
    /// assert_eq!(mnemo::Bf16::from_bits(0xbf80).to_f32(), -1.0);
    /// ```
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }

    /// The bit pattern.
    ///
    /// ```
    /// assert_eq!(mnemo::Bf16::from_f32(-2.0).to_bits(), 0xc000);
    /// ```
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// Rounds an `f32` to the nearest bfloat16 (ties to even); NaN stays NaN.
    ///
    /// ```
    /// use mnemo::Bf16;
    /// // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1).
    /// assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).to_f32(), 1.0);
    /// ```
    pub fn from_f32(value: f32) -> Bf16 {
        let bits = value.to_bits();
        if value.is_nan() {
            // Quiet NaN; plain rounding could carry the payload into infinity.
            return Bf16(((bits >> 16) | 0x0040) as u16);
        }
        let lsb = (bits >> 16) & 1;
        Bf16((bits.wrapping_add(0x7fff + lsb) >> 16) as u16)
    }

    /// The exact `f32` value.
    ///
    /// ```
    /// assert_eq!(mnemo::Bf16::from_bits(0x3f80).to_f32(), 1.0);
    /// ```
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl fmt::Debug for F16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "F16({})", self.to_f32())
    }
}

impl fmt::Display for F16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f32(), f)
    }
}

impl fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bf16({})", self.to_f32())
    }
}

impl fmt::Display for Bf16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f32(), f)
    }
}

impl From<f32> for F16 {
    fn from(value: f32) -> F16 {
        F16::from_f32(value)
    }
}

impl From<F16> for f32 {
    fn from(value: F16) -> f32 {
        value.to_f32()
    }
}

impl From<f32> for Bf16 {
    fn from(value: f32) -> Bf16 {
        Bf16::from_f32(value)
    }
}

impl From<Bf16> for f32 {
    fn from(value: Bf16) -> f32 {
        value.to_f32()
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// A Rust type with a mnemo dtype. Sealed: implemented for `f32`, [`F16`],
/// [`Bf16`], `f64`, `u32` and `u64`.
///
/// ```
/// use mnemo::{DType, Element};
/// assert_eq!(<u32 as Element>::DTYPE, DType::U32);
/// ```
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The matching dtype.
    ///
    /// ```
    /// use mnemo::{DType, Element, F16};
    /// assert_eq!(<F16 as Element>::DTYPE, DType::F16);
    /// ```
    const DTYPE: DType;
}

/// A type vectors can be stored in: `f32`, [`F16`] or [`Bf16`].
///
/// ```
/// use mnemo::{Storage, Bf16};
/// assert_eq!(Bf16::from_f32_rounded(1.5).to_f32_exact(), 1.5);
/// ```
pub trait Storage: Element + PartialEq + fmt::Debug {
    /// Rounds an `f32` to this type (nearest, ties to even).
    ///
    /// ```
    /// use mnemo::{Storage, F16};
    /// assert_eq!(F16::from_f32_rounded(0.5), F16::from_bits(0x3800));
    /// ```
    fn from_f32_rounded(value: f32) -> Self;
    /// The exact `f32` value.
    ///
    /// ```
    /// use mnemo::{Bf16, Storage};
    /// assert_eq!(Bf16::from_bits(0x4000).to_f32_exact(), 2.0);
    /// ```
    fn to_f32_exact(self) -> f32;
}

/// A type resampling times come in: `f32` or `f64`.
///
/// ```
/// use mnemo::{DType, Element, Time};
/// fn dtype_of<T: Time>() -> DType { T::DTYPE }
/// assert_eq!(dtype_of::<f64>(), DType::F64);
/// ```
pub trait Time: Element {}

/// A type pair indices come in: `u32` or `u64`.
///
/// ```
/// use mnemo::{DType, Element, Index};
/// fn dtype_of<I: Index>() -> DType { I::DTYPE }
/// assert_eq!(dtype_of::<u32>(), DType::U32);
/// ```
pub trait Index: Element {}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for F16 {
    const DTYPE: DType = DType::F16;
}
impl Element for Bf16 {
    const DTYPE: DType = DType::Bf16;
}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
}
impl Element for u64 {
    const DTYPE: DType = DType::U64;
}

impl Storage for f32 {
    fn from_f32_rounded(value: f32) -> f32 {
        value
    }
    fn to_f32_exact(self) -> f32 {
        self
    }
}
impl Storage for F16 {
    fn from_f32_rounded(value: f32) -> F16 {
        F16::from_f32(value)
    }
    fn to_f32_exact(self) -> f32 {
        self.to_f32()
    }
}
impl Storage for Bf16 {
    fn from_f32_rounded(value: f32) -> Bf16 {
        Bf16::from_f32(value)
    }
    fn to_f32_exact(self) -> f32 {
        self.to_f32()
    }
}

impl Time for f32 {}
impl Time for f64 {}
impl Index for u32 {}
impl Index for u64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_finite_pattern() {
        for bits in 0..=u16::MAX {
            let h = F16(bits);
            let f = h.to_f32();
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(F16::from_f32(f).0, bits, "{bits:#06x}");
            }
        }
    }

    #[test]
    fn f16_midpoints_round_to_even() {
        // Between consecutive finite f16 values a and b, the f32 midpoint goes
        // to whichever has an even mantissa; a hair either side goes to the
        // nearer one.
        for bits in 0..0x7bffu16 {
            let (a, b) = (F16(bits).to_f32(), F16(bits + 1).to_f32());
            let mid = ((a as f64 + b as f64) / 2.0) as f32;
            assert_eq!(mid as f64, (a as f64 + b as f64) / 2.0, "midpoint exact");
            let even = if bits & 1 == 0 { bits } else { bits + 1 };
            assert_eq!(F16::from_f32(mid).0, even, "{bits:#06x}");
            assert_eq!(F16::from_f32(f32::from_bits(mid.to_bits() - 1)).0, bits);
            assert_eq!(F16::from_f32(f32::from_bits(mid.to_bits() + 1)).0, bits + 1);
            assert_eq!(F16::from_f32(-mid).0, even | 0x8000);
        }
    }

    #[test]
    fn f16_edges() {
        assert_eq!(F16::from_f32(65504.0).0, 0x7bff);
        assert_eq!(F16::from_f32(65519.996).0, 0x7bff);
        assert_eq!(F16::from_f32(65520.0).0, 0x7c00);
        assert_eq!(F16::from_f32(1e10).0, 0x7c00);
        assert_eq!(F16::from_f32(-f32::INFINITY).0, 0xfc00);
        assert_eq!(F16::from_f32(2f32.powi(-25)).0, 0); // tie with zero: even
        assert_eq!(F16::from_f32(2f32.powi(-25) * 1.0001).0, 1);
        assert_eq!(F16::from_f32(1e-30).0, 0);
        assert_eq!(F16::from_f32(-0.0).0, 0x8000);
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
    }

    #[test]
    fn bf16_round_trips_and_rounds_to_even() {
        for bits in 0..=u16::MAX {
            let f = Bf16(bits).to_f32();
            if f.is_nan() {
                assert!(Bf16::from_f32(f).to_f32().is_nan());
                continue;
            }
            assert_eq!(Bf16::from_f32(f).0, bits);
            if bits & 0x7fff < 0x7f80 {
                // Midpoint towards the next larger magnitude.
                let mid = f32::from_bits(f.to_bits() | 0x8000);
                let even = if bits & 1 == 0 { bits } else { bits + 1 };
                assert_eq!(Bf16::from_f32(mid).0, even, "{bits:#06x}");
            }
        }
        assert_eq!(Bf16::from_f32(f32::MAX).0, 0x7f80);
        assert!(Bf16::from_f32(f32::from_bits(0x7fff_ffff))
            .to_f32()
            .is_nan());
        assert!(Bf16::from_f32(f32::from_bits(0x7f80_0001))
            .to_f32()
            .is_nan());
    }
}
