//! Rust types for the Antigravity `localharness` protocol.
//!
//! Not built yet: see the "Foundation" issue.
