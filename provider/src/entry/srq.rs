//! The C entries of shared receive queues.
