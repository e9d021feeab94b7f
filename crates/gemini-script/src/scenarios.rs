//! Named scenario scripts.
