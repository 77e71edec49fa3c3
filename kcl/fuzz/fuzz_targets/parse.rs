//! Lexer + parser on arbitrary input: must never panic, hang or overflow the stack.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = kusion_kcl::lex(&text, kusion_kcl::FileId(u32::MAX), 0);
    let (m, errors) = kusion_kcl::parse_unregistered(&text);
    if errors.is_empty() {
        // An error-free parse never contains recovery placeholders.
        let fp = kusion_kcl::ast_fingerprint(&m);
        assert!(!fp.contains("kind: Missing"), "placeholder in an error-free parse of {text:?}");
    }
    std::hint::black_box((&m, &errors));
});
