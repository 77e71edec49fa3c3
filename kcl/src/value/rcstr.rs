//! [`Str`]: a reference-counted immutable string behind one thin pointer.
//!
//! `Rc<str>` is a fat pointer (16 bytes), which made every [`Value`](super::Value) 24 bytes and
//! every dict entry 48. Keeping the length next to the count in the allocation makes the handle
//! 8 bytes, so a `Value` is 16 and lists of scalars take a third less memory.
//!
//! Strings of up to 7 bytes (names, short labels, `"w42"`) are stored in the handle itself and
//! allocate nothing: the first byte of the handle is then `1 | len << 1` (odd, which an
//! allocation's address never is) and the text follows it. A program's many short strings would
//! otherwise each take a 32-byte heap block.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::borrow::Borrow;
use std::cell::Cell;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::ops::Deref;
use std::ptr::NonNull;

/// Allocation header; the UTF-8 bytes follow it.
#[repr(C)]
struct Header {
    count: Cell<usize>,
    len: usize,
}

const HEADER: usize = size_of::<Header>();

/// Longest string kept inline (the handle's bytes 1..8); the layout needs little-endian.
const INLINE_MAX: usize = if cfg!(target_endian = "little") { 7 } else { 0 };

/// Shared immutable string (like `Rc<str>`, but an 8-byte handle). Not `Send`/`Sync`.
pub struct Str {
    /// An allocation, or (odd value) an inline string of at most [`INLINE_MAX`] bytes.
    ptr: NonNull<Header>,
    /// Owns a header + bytes the way `Rc` does (for drop check and auto traits).
    _own: PhantomData<Header>,
}

fn layout(len: usize) -> Layout {
    // A string longer than isize::MAX could not exist in the first place.
    Layout::from_size_align(HEADER + len, align_of::<Header>()).expect("string too long")
}

impl Str {
    /// A new string holding a copy of `s`.
    pub fn new(s: &str) -> Str {
        if s.len() <= INLINE_MAX {
            let mut b = [0u8; 8];
            b[0] = 1 | (s.len() as u8) << 1;
            b[1..1 + s.len()].copy_from_slice(s.as_bytes());
            let bits = NonZeroUsize::new(usize::from_le_bytes(b)).expect("tag bit is set");
            return Str {
                ptr: NonNull::without_provenance(bits),
                _own: PhantomData,
            };
        }
        let l = layout(s.len());
        // SAFETY: `l` has a non-zero size (the header); the header is written before use and
        // the `s.len()` bytes after it are inside the allocation.
        unsafe {
            let p = alloc(l) as *mut Header;
            let Some(ptr) = NonNull::new(p) else {
                handle_alloc_error(l)
            };
            p.write(Header {
                count: Cell::new(1),
                len: s.len(),
            });
            std::ptr::copy_nonoverlapping(s.as_ptr(), (p as *mut u8).add(HEADER), s.len());
            Str {
                ptr,
                _own: PhantomData,
            }
        }
    }

    fn is_inline(&self) -> bool {
        self.ptr.as_ptr().addr() & 1 == 1
    }

    /// Only for allocated (not inline) strings.
    fn header(&self) -> &Header {
        debug_assert!(!self.is_inline());
        // SAFETY: the allocation lives while any handle does.
        unsafe { self.ptr.as_ref() }
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        if self.is_inline() {
            let len = (self.ptr.as_ptr().addr() as u8 >> 1) as usize;
            // SAFETY: `new` stored `len` bytes of UTF-8 at bytes 1.. of the handle (little-endian),
            // which live as long as `self`.
            return unsafe {
                let bytes = (&self.ptr as *const NonNull<Header> as *const u8).add(1);
                std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, len))
            };
        }
        let len = self.header().len;
        // SAFETY: `len` bytes of valid UTF-8 were copied after the header in `new`.
        unsafe {
            let bytes = (self.ptr.as_ptr() as *const u8).add(HEADER);
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, len))
        }
    }

    /// True when both handles share one allocation.
    pub fn ptr_eq(a: &Str, b: &Str) -> bool {
        a.ptr == b.ptr
    }
}

impl Clone for Str {
    fn clone(&self) -> Str {
        if self.is_inline() {
            return Str {
                ptr: self.ptr,
                _own: PhantomData,
            };
        }
        let c = &self.header().count;
        // As `Rc` does: overflowing the count would free a live string later.
        let n = c
            .get()
            .checked_add(1)
            .unwrap_or_else(|| std::process::abort());
        c.set(n);
        Str {
            ptr: self.ptr,
            _own: PhantomData,
        }
    }
}

impl Drop for Str {
    fn drop(&mut self) {
        if self.is_inline() {
            return;
        }
        let h = self.header();
        let n = h.count.get() - 1;
        if n == 0 {
            let l = layout(h.len);
            // SAFETY: this was the last handle; the block was allocated with this layout.
            unsafe { dealloc(self.ptr.as_ptr() as *mut u8, l) }
        } else {
            h.count.set(n);
        }
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new("")
    }
}

// Hashing and comparison follow `str`, so maps keyed by `Str` can be queried with `&str`.
impl Hash for Str {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl PartialEq for Str {
    fn eq(&self, o: &Str) -> bool {
        // Every string of up to INLINE_MAX bytes is inline and its handle holds just its
        // bytes (zero-padded), so equal handles are the only equal inline strings, and an
        // inline string never equals an allocated (longer) one.
        Str::ptr_eq(self, o) || (!self.is_inline() && !o.is_inline() && self.as_str() == o.as_str())
    }
}
impl Eq for Str {}

impl PartialEq<str> for Str {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}
impl PartialEq<&str> for Str {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}
impl PartialEq<Str> for str {
    fn eq(&self, o: &Str) -> bool {
        self == o.as_str()
    }
}
impl PartialEq<Str> for &str {
    fn eq(&self, o: &Str) -> bool {
        *self == o.as_str()
    }
}

impl PartialOrd for Str {
    fn partial_cmp(&self, o: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Str {
    fn cmp(&self, o: &Str) -> std::cmp::Ordering {
        self.as_str().cmp(o.as_str())
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}
impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Str {
        Str::new(s)
    }
}
impl From<&String> for Str {
    fn from(s: &String) -> Str {
        Str::new(s)
    }
}
impl From<String> for Str {
    fn from(s: String) -> Str {
        Str::new(&s)
    }
}
impl From<&mut str> for Str {
    fn from(s: &mut str) -> Str {
        Str::new(s)
    }
}
impl From<Box<str>> for Str {
    fn from(s: Box<str>) -> Str {
        Str::new(&s)
    }
}
impl From<std::borrow::Cow<'_, str>> for Str {
    fn from(s: std::borrow::Cow<'_, str>) -> Str {
        Str::new(&s)
    }
}
impl From<char> for Str {
    fn from(c: char) -> Str {
        Str::new(c.encode_utf8(&mut [0; 4]))
    }
}
impl From<&Str> for String {
    fn from(s: &Str) -> String {
        s.as_str().to_owned()
    }
}
impl From<Str> for String {
    fn from(s: Str) -> String {
        s.as_str().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_and_shared() {
        assert_eq!(size_of::<Str>(), 8);
        assert_eq!(size_of::<Option<Str>>(), 8);
        let a = Str::from("héllo");
        let b = a.clone();
        assert!(Str::ptr_eq(&a, &b));
        assert_eq!(&*b, "héllo");
        drop(a);
        assert_eq!(b.len(), 6);
        assert_eq!(Str::default().as_str(), "");
        let mut m = rustc_hash::FxHashMap::default();
        m.insert(Str::from("k"), 1);
        assert_eq!(m.get("k"), Some(&1));
        let (a, b) = (Str::from("a"), Str::from("bcdefghij"));
        assert!(a < b);
    }

    #[test]
    fn inline_and_allocated() {
        for s in [
            "",
            "a",
            "w42",
            "1234567",
            "12345678",
            "é€x",
            "a much longer string",
        ] {
            let a = Str::from(s);
            assert_eq!(a.is_inline(), s.len() <= INLINE_MAX, "{s}");
            let b = a.clone();
            drop(a);
            assert_eq!(b.as_str(), s);
            assert_eq!(b, Str::from(s.to_string()));
            // an inline string's text lives in the handle: it must follow a move
            let moved = Box::new(b);
            assert_eq!(&**moved, s);
        }
        assert_eq!(size_of::<Option<Str>>(), 8);
    }

    /// `Str == Str` (handle bits first) agrees with comparing the texts, whatever the
    /// lengths, on both sides of the inline limit.
    #[test]
    fn eq_agrees_with_text() {
        let texts = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "1234567",
            "1234568",
            "12345678",
            "12345679",
            "é",
            "e",
            "a\0",
            "a\0\0",
            "\0",
            "a much longer string",
            "a much longer strinG",
        ];
        for a in texts {
            for b in texts {
                let (x, y) = (Str::from(a), Str::from(b.to_string()));
                assert_eq!(x == y, a == b, "{a:?} {b:?}");
                assert!(x == x.clone());
            }
        }
    }
}
