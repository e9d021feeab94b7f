//! AG-UI 1.0 protocol types and encoders.
//!
//! Not built yet: see the "agui-types" issue.
