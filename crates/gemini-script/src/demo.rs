//! The offline demo script.
