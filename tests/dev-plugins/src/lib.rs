//! Test support, never shipped: this checkout's plugins built for tests and benchmarks.
//!
//! - [`fixtures`]: builds one in-repo plugin (an example or a fixture plugin under `fixtures/`)
//!   with cargo and returns the path of its library or component.
//!
//! It depends on no kusion crate, so any crate (the kernel included) may dev-depend on it
//! without an import circle.

pub mod fixtures;
