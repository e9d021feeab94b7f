//! The agui-antigravity HTTP service.
//!
//! Not built yet: see the "agui-server" issue.
