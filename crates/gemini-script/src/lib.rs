//! A scripted Gemini-compatible model endpoint.
//!
//! Not built yet: see the "Scripted Gemini-compatible model endpoint" issue.
