//! AG-UI sessions backed by Antigravity conversations.
//!
//! Work in progress (see the agui-session issue): the modules below are being built.

pub mod prompt;
pub mod store;
