//! Translation of harness steps into AG-UI events, as a pure state machine.
//!
//! Not built yet: see the "agui-translate" issue.
