//! The spec loader on arbitrary text: an error or a spec, never a panic, and in time linear in
//! the input (libFuzzer's -timeout catches the rest).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(spec) = kusion_kernel::spec::Spec::parse(text, "fuzz.yaml") {
            let _ = spec.validate(&Default::default());
        }
    }
});
