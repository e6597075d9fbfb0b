//! The C entries of queue pairs: create, modify, query, destroy, the legacy posts and the `ibv_qp_ex` work-request calls.
