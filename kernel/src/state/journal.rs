//! How journal records are written down: each record's JSON on a line of its own (JSON Lines).
//! The local backend's `journal.jsonl` and the S3 backend's segments hold exactly this, and the
//! PostgreSQL backend keeps the same JSON, one record per row; so a record is encoded and decoded
//! here only. A file can also hold what an interrupted append left: a last line without its
//! newline ([`Line::Torn`]), or (from older versions) a torn write in front of a whole record
//! ([`salvage_record`]).

use super::JournalRecord;

/// Records as JSON Lines: each record's JSON followed by a newline.
pub(crate) fn encode(records: &[JournalRecord]) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(records.len() * 256);
    for record in records {
        serde_json::to_writer(&mut out, record)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// One record's JSON (a PostgreSQL row).
#[cfg(feature = "postgres")]
pub(crate) fn encode_one(record: &JournalRecord) -> Result<String, serde_json::Error> {
    serde_json::to_string(record)
}

/// One record from its JSON (a journal line, a PostgreSQL row).
pub(crate) fn decode(text: &[u8]) -> Result<JournalRecord, serde_json::Error> {
    serde_json::from_slice(text)
}

/// A line made of a torn write followed by a whole record (written by versions that appended
/// after a torn line without cutting it off): the bytes dropped and the record, when the line
/// ends with exactly one readable record.
pub(crate) fn salvage_record(line: &[u8]) -> Option<(usize, &[u8])> {
    let marker = b"{\"op\":";
    let mut from = line.len();
    while let Some(i) = line[..from]
        .windows(marker.len())
        .rposition(|w| w == marker)
    {
        if i > 0 && decode(&line[i..]).is_ok() {
            return Some((i, &line[i..]));
        }
        from = i;
    }
    None
}

/// One line of a journal file.
pub(crate) enum Line<'a> {
    /// A whole line (its newline was written).
    Record(&'a [u8]),
    /// The last line, without its newline: a torn write.
    Torn(&'a [u8]),
}

/// The non-blank lines of a journal with their 1-based line numbers.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, Line<'_>)> {
    let whole = bytes.ends_with(b"\n");
    let count = bytes.split(|b| *b == b'\n').count();
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .map(move |(i, l)| {
            let line = if !whole && i + 1 == count {
                Line::Torn(l)
            } else {
                Line::Record(l)
            };
            (i + 1, line)
        })
}
