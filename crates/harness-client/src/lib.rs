//! A Rust host for the Antigravity `localharness` binary.
//!
//! Not built yet: see the "harness-client" issue.
