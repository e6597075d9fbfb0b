//! The C entries of completion queues and `ibv_cq_ex`.
