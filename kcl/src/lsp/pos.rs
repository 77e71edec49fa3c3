//! Byte offsets to LSP positions and back, in the position encoding agreed at initialization
//! (UTF-16 code units by default; UTF-8 bytes or UTF-32 when the client offers them).

use lsp_types::{Position, Range};

/// Position encodings (LSP 3.17 `positionEncoding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Encoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

impl Encoding {
    /// The protocol's name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf16 => "utf-16",
            Encoding::Utf32 => "utf-32",
        }
    }
    fn width(self, c: char) -> u32 {
        match self {
            Encoding::Utf8 => c.len_utf8() as u32,
            Encoding::Utf16 => c.len_utf16() as u32,
            Encoding::Utf32 => 1,
        }
    }
}

/// Line starts of a text.
pub fn line_starts(text: &str) -> Vec<u32> {
    let mut v = vec![0];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            v.push(i as u32 + 1);
        }
    }
    v
}

/// The position of byte `off` (clamped to the text, moved back to a character boundary).
pub fn position(text: &str, starts: &[u32], off: u32, enc: Encoding) -> Position {
    let mut off = (off as usize).min(text.len());
    while !text.is_char_boundary(off) {
        off -= 1;
    }
    let line = match starts.binary_search(&(off as u32)) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    };
    let start = starts.get(line).copied().unwrap_or(0) as usize;
    let col: u32 = text
        .get(start.min(off)..off)
        .unwrap_or("")
        .chars()
        .map(|c| enc.width(c))
        .sum();
    Position::new(line as u32, col)
}

/// The byte offset of a position (a column past the line's end is its end).
pub fn offset(text: &str, starts: &[u32], pos: Position, enc: Encoding) -> u32 {
    let Some(&start) = starts.get(pos.line as usize) else {
        return text.len() as u32;
    };
    let end = starts
        .get(pos.line as usize + 1)
        .map(|&e| e as usize)
        .unwrap_or(text.len());
    let line = text.get(start as usize..end).unwrap_or("");
    let mut col = 0u32;
    for (i, c) in line.char_indices() {
        if col >= pos.character || c == '\n' || c == '\r' && line[i..].starts_with("\r\n") {
            return start + i as u32;
        }
        col += enc.width(c);
    }
    end as u32
}

/// The range of bytes `lo..hi`.
pub fn range(text: &str, starts: &[u32], lo: u32, hi: u32, enc: Encoding) -> Range {
    Range::new(
        position(text, starts, lo, enc),
        position(text, starts, hi.max(lo), enc),
    )
}

/// Applies an incremental change (or a full replacement when `range` is absent).
pub fn apply_change(text: &str, range: Option<Range>, new: &str, enc: Encoding) -> String {
    let Some(r) = range else {
        return new.to_string();
    };
    let starts = line_starts(text);
    let lo = offset(text, &starts, r.start, enc) as usize;
    let hi = (offset(text, &starts, r.end, enc) as usize).max(lo);
    let mut out = String::with_capacity(text.len() + new.len());
    out.push_str(&text[..lo]);
    out.push_str(new);
    out.push_str(&text[hi..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_and_utf8_columns() {
        let t = "a = \"é😀\"\nb = 1\n";
        let s = line_starts(t);
        // after the emoji: 5 + 1 (é) + 2 (😀) UTF-16 units, 5 + 2 + 4 bytes
        let off = t.find("\"\n").map(|i| i as u32).unwrap_or(0);
        assert_eq!(position(t, &s, off, Encoding::Utf16), Position::new(0, 8));
        assert_eq!(position(t, &s, off, Encoding::Utf8), Position::new(0, 11));
        assert_eq!(position(t, &s, off, Encoding::Utf32), Position::new(0, 7));
        for enc in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            let p = position(t, &s, off, enc);
            assert_eq!(offset(t, &s, p, enc), off);
        }
        assert_eq!(
            offset(t, &s, Position::new(1, 99), Encoding::Utf16),
            t.len() as u32 - 1
        );
        assert_eq!(
            offset(t, &s, Position::new(9, 0), Encoding::Utf16),
            t.len() as u32
        );
        // inside a surrogate pair: the offset is not a char boundary, moved back
        let mid = t.find('😀').map(|i| i as u32 + 2).unwrap_or(0);
        assert_eq!(position(t, &s, mid, Encoding::Utf16), Position::new(0, 6));
    }

    #[test]
    fn incremental_changes() {
        let t = "a = 1\nb = 2\n";
        let r = Range::new(Position::new(1, 4), Position::new(1, 5));
        assert_eq!(
            apply_change(t, Some(r), "30", Encoding::Utf16),
            "a = 1\nb = 30\n"
        );
        assert_eq!(apply_change(t, None, "x", Encoding::Utf16), "x");
        // a range past the end appends
        let r = Range::new(Position::new(7, 0), Position::new(8, 0));
        assert_eq!(
            apply_change(t, Some(r), "c", Encoding::Utf16),
            "a = 1\nb = 2\nc"
        );
    }
}
