//! Settling the promises of native operations in batches: one thread-safe
//! function per JS thread drains a queue of finished operations, instead of
//! one created, woken and torn down per call (`env.spawn_future`). It keeps
//! the event loop alive only while operations are in flight. The client's
//! events go through the same queue, so JS sees them in the order the core
//! emitted them relative to the operations they belong to (a node's fault
//! before the result it contributed to). A failed operation's promise is
//! rejected here, on the JS thread, with the typed error `errors.rs` builds.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{spawn, PromiseRaw, ToNapiValue};
use napi::{sys, Env, Error, Result, Status};

use crate::binding::errors::JsResult;
use crate::binding::lock::{promise, Deferred};
use crate::core::base::Peak;

mod callback;

pub use callback::Callback;

/// Runs on the JS thread: settles one promise, or delivers one event.
type Settle = Box<dyn FnOnce(sys::napi_env) + Send>;

/// A queued item; `op` for an operation counted as in flight.
struct Item {
    op: bool,
    run: Settle,
}

/// A raw N-API handle moved to the thread that finishes the operation; it is
/// only used again on the JS thread it came from.
struct Raw<T>(T);
unsafe impl<T> Send for Raw<T> {}
unsafe impl<T> Sync for Raw<T> {}

impl<T: Copy> Raw<T> {
    /// The handle (a method, so closures capture the whole `Send` wrapper).
    fn get(&self) -> T {
        self.0
    }
}

/// The finished operations of one JS thread, and how to wake it.
struct Queue {
    tsfn: Raw<sys::napi_threadsafe_function>,
    done: Mutex<Pending>,
}

/// What waits for the JS thread; `gone` once its environment was torn down.
#[derive(Default)]
struct Pending {
    items: Vec<Item>,
    gone: bool,
}

impl Queue {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a settled operation; the first into an empty queue wakes the JS
    /// thread. Once the environment is gone the item is dropped instead (what
    /// it holds, e.g. a lock, is let go): nobody waits for it, and the
    /// thread-safe function no longer exists.
    fn push(&self, item: Item) {
        let mut pending = self.pending();
        if pending.gone {
            drop(pending);
            drop(item);
            return;
        }
        pending.items.push(item);
        if pending.items.len() == 1 {
            // Called under the lock: the teardown, which frees the thread-safe
            // function, marks the queue gone under it first.
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.0,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }

    /// The environment is torn down: no more calls into it; what was queued
    /// is dropped (outside the lock: dropping may queue more).
    fn shut(&self) {
        let items = {
            let mut pending = self.pending();
            pending.gone = true;
            std::mem::take(&mut pending.items)
        };
        drop(items);
    }
}

/// The JS thread's side: its queue and how many operations are in flight.
struct Local {
    env: sys::napi_env,
    queue: Arc<Queue>,
    in_flight: usize,
    /// The most operations in flight at once since the last burst drained.
    peak: Peak,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::GenericFailure, format!("{what} failed")))
    }
}

/// Runs on the JS thread: settles every queued operation.
unsafe extern "C" fn drain(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    if env.is_null() || context.is_null() {
        return; // the environment is shutting down
    }
    let queue = &*(context as *const Queue);
    let done = std::mem::take(&mut queue.pending().items);
    let settled = done.iter().filter(|i| i.op).count();
    for item in done {
        (item.run)(env);
    }
    LOCAL.with(|local| {
        if let Some(local) = local.borrow_mut().as_mut().filter(|l| l.env == env) {
            local.in_flight = local.in_flight.saturating_sub(settled);
            local.peak.track(local.in_flight);
            if local.in_flight == 0 {
                sys::napi_unref_threadsafe_function(env, local.queue.tsfn.0);
            }
        }
    });
}

/// The environment of a queue ends (a worker terminated or exited, the
/// process exits): runtime threads stop calling into it.
unsafe extern "C" fn torn_down(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    (*(context as *const Queue)).shut();
}

/// This JS thread's queue, created (unreferenced) on first use.
fn queue(env: sys::napi_env) -> Result<Arc<Queue>> {
    LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        if let Some(l) = local.as_ref().filter(|l| l.env == env) {
            return Ok(l.queue.clone());
        }
        let mut name = ptr::null_mut();
        let label = "lockdog.settle";
        check(
            unsafe {
                sys::napi_create_string_utf8(
                    env,
                    label.as_ptr().cast(),
                    label.len() as isize,
                    &mut name,
                )
            },
            "napi_create_string_utf8",
        )?;
        // The queue lives as long as the process: the thread-safe function's
        // context must outlive every call a runtime thread may still make.
        let queue = Arc::new(Queue {
            tsfn: Raw(ptr::null_mut()),
            done: Mutex::default(),
        });
        let context = Arc::into_raw(queue.clone()) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        check(
            unsafe {
                sys::napi_create_threadsafe_function(
                    env,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0,
                    1,
                    ptr::null_mut(),
                    None,
                    context,
                    Some(drain),
                    &mut tsfn,
                )
            },
            "napi_create_threadsafe_function",
        )?;
        // Written once, before any operation can push: nothing reads it yet.
        let queue_ptr = Arc::as_ptr(&queue) as *mut Queue;
        unsafe { (*queue_ptr).tsfn = Raw(tsfn) };
        check(
            unsafe { sys::napi_unref_threadsafe_function(env, tsfn) },
            "napi_unref_threadsafe_function",
        )?;
        // Registered after the thread-safe function, so it runs before Node
        // frees it (cleanup hooks run in reverse order).
        check(
            unsafe { sys::napi_add_env_cleanup_hook(env, Some(torn_down), context) },
            "napi_add_env_cleanup_hook",
        )?;
        *local = Some(Local {
            env,
            queue: queue.clone(),
            in_flight: 0,
            peak: Peak::default(),
        });
        Ok(queue)
    })
}

/// Runs `fut` on the runtime and returns a promise of its result, settled
/// through this JS thread's batch queue.
pub fn settle_later<'env, T, F>(env: &'env Env, fut: F) -> Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = JsResult<T>> + Send + 'static,
{
    let raw_env = env.raw();
    let (deferred, promise) = promise(raw_env)?;
    settle_deferred_later(raw_env, deferred, fut)?;
    Ok(PromiseRaw::new(raw_env, promise))
}

/// Counts one more operation in flight on this JS thread (keeping the loop alive).
fn count_in_flight(env: sys::napi_env) {
    LOCAL.with(|local| {
        if let Some(local) = local.borrow_mut().as_mut().filter(|l| l.env == env) {
            if local.in_flight == 0 {
                unsafe { sys::napi_ref_threadsafe_function(env, local.queue.tsfn.0) };
            }
            local.in_flight += 1;
            local.peak.track(local.in_flight);
        }
    });
}

/// [`settle_later`] for a promise that already exists (on its JS thread).
pub(crate) fn settle_deferred_later<T, F>(
    env: sys::napi_env,
    deferred: Deferred,
    fut: F,
) -> Result<()>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = JsResult<T>> + Send + 'static,
{
    let queue = queue(env)?;
    count_in_flight(env);
    spawn(async move {
        let result = fut.await;
        queue.push(Item {
            op: true,
            run: Box::new(move |env| deferred.settle(env, result)),
        });
    });
    Ok(())
}

/// Settles a promise on its JS thread after everything queued so far (the
/// events an operation reported come before its result).
pub(crate) fn settle_in_turn<T>(env: sys::napi_env, deferred: Deferred, result: JsResult<T>)
where
    T: ToNapiValue + Send + 'static,
{
    match queue(env) {
        Ok(queue) => {
            count_in_flight(env);
            queue.push(Item {
                op: true,
                run: Box::new(move |env| deferred.settle(env, result)),
            });
        }
        Err(_) => deferred.settle(env, result),
    }
}

/// Runs work on this JS thread from any thread, through its queue; it does
/// not keep the event loop alive by itself.
#[derive(Clone)]
pub(crate) struct JsQueue(Arc<Queue>);

impl JsQueue {
    pub fn of(env: sys::napi_env) -> Result<JsQueue> {
        queue(env).map(JsQueue)
    }

    pub fn run(&self, f: impl FnOnce(sys::napi_env) + Send + 'static) {
        self.0.push(Item {
            op: false,
            run: Box::new(f),
        });
    }
}
