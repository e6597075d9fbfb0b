//! ND2 / NDK connector semantics over rdma_cm.
