//! NDK_LISTENER: NdkListen, NdkGetListenerLocalAddress, NdkControlConnectEvents, close.
//!
//! An NDK listener delivers each incoming request as a new connector through its connect-event
//! callback. Over the Rust [`Listener`] that is one GetConnectionRequest always armed with a
//! fresh [`Connector`]; when it completes, the connector goes to the callback (or to a queue
//! while connect events are paused) and the next one is armed. The C entries are in `entry.rs`.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use super::boundary::{code, BufferOut, ConnectCallback, Handle, NtStatus, RequestCompletion, STATUS_SUCCESS};
use super::ndk_connector::NdkConnector;
use super::ndk_verbs::AdapterShared;
use crate::status::NdStatus;
use crate::{Connector, Listener};

/// `NDK_FN_CONNECT_EVENT_CALLBACK`: a new connector, owned by the callee from then on.
pub type ConnectEvent = Option<unsafe extern "C" fn(context: *mut c_void, connector: *mut NdkConnector)>;

/// NDK has no backlog argument: 0 adds no limit of the shim's own (the kernel's still applies).
const NDK_BACKLOG: u32 = 0;

#[repr(C)]
pub struct NdkListener {
    dispatch: *const NdkListenerDispatch,
    shared: Arc<ListenerShared>,
}

struct ListenerShared {
    adapter: Arc<AdapterShared>,
    listener: Listener,
    event: ConnectCallback<NdkConnector>,
    state: Mutex<Delivery>,
}

#[derive(Default)]
struct Delivery {
    /// A GetConnectionRequest is pending.
    armed: bool,
    paused: bool,
    /// Requests that arrived while paused.
    held: VecDeque<Connector>,
}

#[repr(C)]
pub struct NdkListenerDispatch {
    pub close: unsafe extern "C" fn(*mut NdkListener) -> NtStatus,
    pub listen:
        unsafe extern "C" fn(*mut NdkListener, *const libc::sockaddr, u32, RequestCompletion, *mut c_void) -> NtStatus,
    pub get_local_address: unsafe extern "C" fn(*mut NdkListener, *mut libc::sockaddr, *mut u32) -> NtStatus,
    pub control_connect_events: unsafe extern "C" fn(*mut NdkListener, u8) -> NtStatus,
}

impl NdkListener {
    pub(super) fn new(adapter: &Arc<AdapterShared>, event: ConnectCallback<NdkConnector>) -> NdkListener {
        NdkListener {
            dispatch: <NdkListener as Handle>::DISPATCH,
            shared: Arc::new(ListenerShared {
                adapter: Arc::clone(adapter),
                listener: Listener::new(&adapter.adapter),
                event,
                state: Mutex::new(Delivery::default()),
            }),
        }
    }
}

impl ListenerShared {
    fn state(&self) -> MutexGuard<'_, Delivery> {
        crate::sync::lock(&self.state)
    }

    /// Keeps one GetConnectionRequest pending while listening and not paused.
    fn arm(self: &Arc<Self>) {
        {
            let mut state = self.state();
            if state.armed || state.paused {
                return;
            }
            state.armed = true;
        }
        let connector = Connector::new(&self.adapter.adapter);
        let pending = match self.listener.get_connection_request(&connector) {
            Ok(pending) => pending,
            Err(status) => {
                log::warn!("ndk: listener cannot take connection requests: {status}");
                self.state().armed = false;
                return;
            }
        };
        let weak = Arc::downgrade(self);
        // The closure holds the listener weakly: closing it cancels the Get, and the connector
        // dropped here rejects the request it may hold.
        pending.on_complete(move |status| {
            if let Some(me) = weak.upgrade() {
                me.arrived(connector, status);
            }
        });
    }

    fn arrived(self: &Arc<Self>, connector: Connector, status: NdStatus) {
        let deliver = {
            let mut state = self.state();
            state.armed = false;
            if status != NdStatus::ND_SUCCESS {
                log::debug!("ndk: connection request ended with {status}");
                return;
            }
            if state.paused {
                state.held.push_back(connector);
                None
            } else {
                Some(connector)
            }
        };
        if let Some(connector) = deliver {
            self.deliver(connector);
        }
        self.arm();
    }

    fn deliver(&self, connector: Connector) {
        self.event.deliver(NdkConnector::wrap(&self.adapter, connector));
    }
}

impl NdkListener {
    /// NdkListen: binds to `address` (port 0: one of the ND range) and listens. It finishes
    /// inline, so `RequestCompletion` is never called.
    pub(super) fn listen(&self, address: SocketAddr) -> Result<NtStatus, NtStatus> {
        self.shared.listener.bind(address).map_err(code)?;
        self.shared.listener.listen(NDK_BACKLOG).map_err(code)?;
        self.shared.arm();
        Ok(STATUS_SUCCESS)
    }

    pub(super) fn get_local_address(&self, out: BufferOut<'_>) -> Result<NtStatus, NtStatus> {
        out.fill(|b| self.shared.listener.get_local_address(b))
    }

    /// NdkControlConnectEvents: `pause` holds new connectors back; resuming delivers the held
    /// ones.
    pub(super) fn control_connect_events(&self, pause: bool) {
        let shared = &self.shared;
        if pause {
            shared.state().paused = true;
            return;
        }
        let held = {
            let mut state = shared.state();
            state.paused = false;
            std::mem::take(&mut state.held)
        };
        for connector in held {
            shared.deliver(connector);
        }
        shared.arm();
    }
}
