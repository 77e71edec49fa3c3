//! Source positions: compact byte spans plus a process-wide file registry.
//!
//! A [`Span`] is 12 bytes (file id + byte range). Line and column are computed only when a
//! diagnostic needs them: the line-start table of a file is built on first lookup and then
//! binary-searched, so parsing never pays for positions it does not print.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

/// Identifies one source text registered in the [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `lo..hi` in one source file. `lo == hi` marks a point (e.g. end of file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The file the range belongs to.
    pub file: FileId,
    /// Start byte offset (inclusive).
    pub lo: u32,
    /// End byte offset (exclusive).
    pub hi: u32,
}

impl Span {
    /// A span covering `lo..hi` in `file`.
    pub const fn new(file: FileId, lo: u32, hi: u32) -> Self {
        Span { file, lo, hi }
    }
    /// The smallest span covering both `self` and `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }
    /// A zero-width span at the start of `self`.
    pub fn shrink_to_lo(self) -> Span {
        Span {
            hi: self.lo,
            ..self
        }
    }
    /// A zero-width span at the end of `self`.
    pub fn shrink_to_hi(self) -> Span {
        Span {
            lo: self.hi,
            ..self
        }
    }
    /// Resolves the start of the span to 1-based line and column (columns count chars).
    pub fn loc(self) -> Loc {
        source_map().loc(self.file, self.lo)
    }
    /// The source text covered by the span, if the file is registered.
    pub fn text(self) -> Option<Arc<str>> {
        let f = source_map().get(self.file)?;
        let s = f.text.get(self.lo as usize..self.hi as usize)?;
        Some(Arc::from(s))
    }
}

/// A resolved position: file name, 1-based line and 1-based column (in chars).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Display name of the file (an absolute path for files read from disk).
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in Unicode scalar values.
    pub col: u32,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// One registered source text.
#[derive(Debug)]
pub struct SourceFile {
    /// The id spans use to refer to this file.
    pub id: FileId,
    /// Display name (absolute path for disk files, the given name otherwise).
    pub name: Arc<str>,
    /// Path on disk, when the text came from a file.
    pub path: Option<PathBuf>,
    /// The full text.
    pub text: Arc<str>,
    lines: OnceLock<Vec<u32>>,
}

impl SourceFile {
    /// Byte offsets at which each line starts (built lazily, once).
    pub fn line_starts(&self) -> &[u32] {
        self.lines.get_or_init(|| {
            let mut v = Vec::with_capacity(self.text.len() / 32 + 1);
            v.push(0);
            for (i, b) in self.text.bytes().enumerate() {
                if b == b'\n' {
                    v.push(i as u32 + 1);
                }
            }
            v
        })
    }
    /// 0-based line index containing byte `pos`.
    pub fn line_index(&self, pos: u32) -> usize {
        let starts = self.line_starts();
        match starts.binary_search(&pos) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }
    /// The text of 0-based line `idx` without its line terminator.
    pub fn line_text(&self, idx: usize) -> &str {
        let starts = self.line_starts();
        let lo = starts.get(idx).copied().unwrap_or(self.text.len() as u32) as usize;
        let hi = starts
            .get(idx + 1)
            .map(|&h| h as usize)
            .unwrap_or(self.text.len());
        let s = &self.text[lo.min(self.text.len())..hi];
        s.trim_end_matches(['\n', '\r'])
    }
    /// 1-based (line, col) of byte `pos`; positions past the end clamp to the end.
    pub fn line_col(&self, pos: u32) -> (u32, u32) {
        let pos = pos.min(self.text.len() as u32);
        let idx = self.line_index(pos);
        let start = self.line_starts()[idx] as usize;
        let mut end = pos as usize;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let col = self.text[start..end].chars().count() as u32 + 1;
        (idx as u32 + 1, col)
    }
}

/// The process-wide registry of source texts. Append-only: ids stay valid for the life of
/// the process, which lets any [`Span`] be resolved without threading a map around.
#[derive(Default)]
pub struct SourceMap {
    files: RwLock<Vec<Arc<SourceFile>>>,
}

/// The global [`SourceMap`].
pub fn source_map() -> &'static SourceMap {
    static MAP: OnceLock<SourceMap> = OnceLock::new();
    MAP.get_or_init(SourceMap::default)
}

impl SourceMap {
    /// Registers a text and returns its file.
    pub fn add(
        &self,
        name: impl Into<Arc<str>>,
        path: Option<&Path>,
        text: impl Into<Arc<str>>,
    ) -> Arc<SourceFile> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let file = Arc::new(SourceFile {
            id: FileId(files.len() as u32),
            name: name.into(),
            path: path.map(Path::to_path_buf),
            text: text.into(),
            lines: OnceLock::new(),
        });
        files.push(file.clone());
        file
    }
    /// Drops the text of a file nobody refers to any more (the language server registers every
    /// version of an edited buffer): the id stays valid, its spans resolve to the file's start.
    pub fn release(&self, id: FileId) {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = files.get_mut(id.0 as usize) {
            *slot = Arc::new(SourceFile {
                id,
                name: slot.name.clone(),
                path: slot.path.clone(),
                text: Arc::from(""),
                lines: OnceLock::new(),
            });
        }
    }
    /// The file with id `id`, if registered.
    pub fn get(&self, id: FileId) -> Option<Arc<SourceFile>> {
        self.files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id.0 as usize)
            .cloned()
    }
    /// Resolves byte `pos` of file `id` to a [`Loc`]; unknown files give line 0, col 0.
    pub fn loc(&self, id: FileId, pos: u32) -> Loc {
        match self.get(id) {
            Some(f) => {
                let (line, col) = f.line_col(pos);
                Loc {
                    file: f.name.clone(),
                    line,
                    col,
                }
            }
            None => Loc {
                file: Arc::from("<unknown>"),
                line: 0,
                col: 0,
            },
        }
    }
}
