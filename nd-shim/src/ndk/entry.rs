//! The C entries of the NDK face: its dispatch tables and exported functions.
