//! NDK_LISTENER: NdkListen, NdkGetListenerLocalAddress, NdkControlConnectEvents, close.
//!
//! An NDK listener delivers each incoming request as a new connector through its connect-event
//! callback. Over the Rust [`Listener`] that is one GetConnectionRequest always armed with a
//! fresh [`Connector`]; when it completes, the connector goes to the callback (or to a queue
//! while connect events are paused) and the next one is armed.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use super::boundary::{
    code, handle, read_sockaddr, status_boundary, take_handle, write_address, Context, Handle, NtStatus,
    RequestCompletion, STATUS_SUCCESS,
};
use super::ndk_connector::NdkConnector;
use super::ndk_verbs::AdapterShared;
use crate::status::NdStatus;
use crate::{Connector, Listener};

/// `NDK_FN_CONNECT_EVENT_CALLBACK`: a new connector, owned by the callee from then on.
pub type ConnectEvent = Option<unsafe extern "C" fn(context: *mut c_void, connector: *mut NdkConnector)>;

/// NDK has no backlog argument: 0 adds no limit of the shim's own (the kernel's still applies).
const NDK_BACKLOG: u32 = 0;

type ConnectEventFn = unsafe extern "C" fn(*mut c_void, *mut NdkConnector);

#[repr(C)]
pub struct NdkListener {
    dispatch: *const NdkListenerDispatch,
    shared: Arc<ListenerShared>,
}

struct ListenerShared {
    adapter: Arc<AdapterShared>,
    listener: Listener,
    event: ConnectEventFn,
    context: Context,
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

static LISTENER_DISPATCH: NdkListenerDispatch = NdkListenerDispatch {
    close: close_listener,
    listen,
    get_local_address: listener_local_address,
    control_connect_events,
};

impl Handle for NdkListener {
    type Dispatch = NdkListenerDispatch;
    const DISPATCH: &'static NdkListenerDispatch = &LISTENER_DISPATCH;
}

impl NdkListener {
    pub(super) fn new(adapter: &Arc<AdapterShared>, event: ConnectEventFn, context: *mut c_void) -> NdkListener {
        NdkListener {
            dispatch: &LISTENER_DISPATCH,
            shared: Arc::new(ListenerShared {
                adapter: Arc::clone(adapter),
                listener: Listener::new(&adapter.adapter),
                event,
                context: Context(context),
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
        let object = Box::into_raw(Box::new(NdkConnector::wrap(&self.adapter, connector)));
        // SAFETY: the caller's callback and context; the connector is now the callee's, to
        // close with NdkCloseConnector.
        unsafe { (self.event)(self.context.0, object) };
    }
}

unsafe extern "C" fn close_listener(listener: *mut NdkListener) -> NtStatus {
    status_boundary("NdkCloseListener", || {
        // SAFETY: the caller gives up its handle.
        drop(unsafe { take_handle(listener)? });
        Ok(STATUS_SUCCESS)
    })
}

/// NdkListen: binds to `address` (port 0: one of the ND range) and listens. It finishes inline,
/// so `RequestCompletion` is never called.
unsafe extern "C" fn listen(
    listener: *mut NdkListener,
    address: *const libc::sockaddr,
    length: u32,
    _completion: RequestCompletion,
    _context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkListen", || {
        // SAFETY: the caller's handle and address.
        let (l, address) = unsafe { (handle(listener)?, read_sockaddr(address, length)?) };
        l.shared.listener.bind(address).map_err(code)?;
        l.shared.listener.listen(NDK_BACKLOG).map_err(code)?;
        l.shared.arm();
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn listener_local_address(
    listener: *mut NdkListener,
    address: *mut libc::sockaddr,
    length: *mut u32,
) -> NtStatus {
    status_boundary("NdkGetListenerLocalAddress", || {
        // SAFETY: the caller's handle, buffer and length.
        unsafe {
            let l = handle(listener)?;
            write_address(address, length, |b| l.shared.listener.get_local_address(b))
        }
    })
}

/// NdkControlConnectEvents: `pause` non-zero holds new connectors back; zero delivers the held
/// ones and resumes.
unsafe extern "C" fn control_connect_events(listener: *mut NdkListener, pause: u8) -> NtStatus {
    status_boundary("NdkControlConnectEvents", || {
        // SAFETY: the caller's handle.
        let l = unsafe { handle(listener)? };
        let shared = &l.shared;
        if pause != 0 {
            shared.state().paused = true;
            return Ok(STATUS_SUCCESS);
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
        Ok(STATUS_SUCCESS)
    })
}
