//! rxe_rs: a libibverbs provider for rdma_rxe.
