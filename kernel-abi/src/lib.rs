//! The kernel uverbs ABI and the rdma_rxe ABI as Rust types.
