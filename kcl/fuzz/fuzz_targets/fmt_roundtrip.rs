//! Formatter round trip: for every input that parses, the formatted text parses to the same
//! tree (spans aside) with the same comments, and formatting it again changes nothing.
#![no_main]

use kusion_kcl::{ast_fingerprint, format_module};
use kusion_kcl::parse_unregistered;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (m, errors) = parse_unregistered(text);
    if !errors.is_empty() {
        return;
    }
    let out = format_module(&m, text);
    let (m2, errors2) = parse_unregistered(&out);
    assert!(errors2.is_empty(), "formatted text does not parse: {:?}\n--- input\n{text}\n--- output\n{out}", errors2[0].message());
    assert_eq!(ast_fingerprint(&m), ast_fingerprint(&m2), "tree changed\n--- input\n{text}\n--- output\n{out}");
    assert_eq!(m.comments.len(), m2.comments.len(), "comments lost\n--- input\n{text}\n--- output\n{out}");
    let again = format_module(&m2, &out);
    assert_eq!(out, again, "not idempotent\n--- input\n{text}");
});
