//! The C entries (vtables) of the data objects: CQ, QP, SRQ, MR and MW.
