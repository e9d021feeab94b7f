//! AG-UI sessions backed by Antigravity conversations.
//!
//! Not built yet: see the "agui-session" issue.
