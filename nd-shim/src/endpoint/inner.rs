//! What a connector and a listener keep behind their handle, and how one is made.

#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex, Weak};

use crate::engine::{Adapter, AdapterInner, CmEventSink};

/// What a connector and a listener keep behind their handle: the adapter, the token its
/// rdma_cm events come under, and the core (state and all) behind the one lock.
pub(crate) struct EndpointInner<Core> {
    pub(super) adapter: Arc<AdapterInner>,
    pub(super) token: u64,
    pub(super) core: Mutex<Core>,
}

impl<Core: Default> EndpointInner<Core>
where
    EndpointInner<Core>: CmEventSink + 'static,
{
    /// A new one of `adapter`, registered as the owner of its rdma_cm events.
    pub(super) fn new(adapter: &Adapter) -> Arc<Self> {
        Arc::new_cyclic(|weak: &Weak<Self>| EndpointInner {
            adapter: Arc::clone(&adapter.inner),
            token: adapter.inner.register(weak.clone()),
            core: Mutex::new(Core::default()),
        })
    }
}
