//! Settling the promises of native operations in batches: one thread-safe
//! function per JS thread drains a queue of finished operations, instead of
//! one created, woken and torn down per call (`env.spawn_future`). It keeps
//! the event loop alive only while operations are in flight. The client's
//! events go through the same queue, so JS sees them in the order the core
//! emitted them relative to the operations they belong to (a node's fault
//! before the result it contributed to).

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{spawn, PromiseRaw, ToNapiValue};
use napi::{sys, Env, Error, JsError, Result, Status};

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
    done: Mutex<Vec<Item>>,
}

impl Queue {
    /// Queues a settled operation; the first into an empty queue wakes the JS thread.
    fn push(&self, item: Item) {
        let wake = {
            let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
            done.push(item);
            done.len() == 1
        };
        if wake {
            // Fails only while the environment shuts down: nobody waits then.
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.0,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }
}

/// The JS thread's side: its queue and how many operations are in flight.
struct Local {
    env: sys::napi_env,
    queue: Arc<Queue>,
    in_flight: usize,
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
    let done = std::mem::take(&mut *queue.done.lock().unwrap_or_else(|p| p.into_inner()));
    let settled = done.iter().filter(|i| i.op).count();
    for item in done {
        (item.run)(env);
    }
    LOCAL.with(|local| {
        if let Some(local) = local.borrow_mut().as_mut().filter(|l| l.env == env) {
            local.in_flight = local.in_flight.saturating_sub(settled);
            if local.in_flight == 0 {
                sys::napi_unref_threadsafe_function(env, local.queue.tsfn.0);
            }
        }
    });
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
        *local = Some(Local {
            env,
            queue: queue.clone(),
            in_flight: 0,
        });
        Ok(queue)
    })
}

/// Runs `fut` on the runtime and returns a promise of its result, settled
/// through this JS thread's batch queue.
pub fn settle_later<'env, T, F>(env: &'env Env, fut: F) -> Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let raw_env = env.raw();
    let (deferred, promise) = promise(raw_env)?;
    settle_deferred_later(raw_env, deferred, fut)?;
    Ok(PromiseRaw::new(raw_env, promise))
}

/// A new promise and its deferred.
pub(crate) fn promise(env: sys::napi_env) -> Result<(Deferred, sys::napi_value)> {
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    check(
        unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) },
        "napi_create_promise",
    )?;
    Ok((Deferred(Raw(deferred)), promise))
}

/// A promise's settling end; settled once, on the JS thread it came from.
pub(crate) struct Deferred(Raw<sys::napi_deferred>);

impl Deferred {
    /// Settles the promise now (on its JS thread).
    pub fn settle<T: ToNapiValue>(self, env: sys::napi_env, result: Result<T>) {
        unsafe {
            match result.and_then(|v| T::to_napi_value(env, v)) {
                Ok(value) => sys::napi_resolve_deferred(env, self.0.get(), value),
                Err(e) => {
                    sys::napi_reject_deferred(env, self.0.get(), JsError::from(e).into_value(env))
                }
            };
        }
    }
}

/// Counts one more operation in flight on this JS thread (keeping the loop alive).
fn count_in_flight(env: sys::napi_env) {
    LOCAL.with(|local| {
        if let Some(local) = local.borrow_mut().as_mut().filter(|l| l.env == env) {
            if local.in_flight == 0 {
                unsafe { sys::napi_ref_threadsafe_function(env, local.queue.tsfn.0) };
            }
            local.in_flight += 1;
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
    F: Future<Output = Result<T>> + Send + 'static,
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
pub(crate) fn settle_in_turn<T>(env: sys::napi_env, deferred: Deferred, result: Result<T>)
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

/// A JS function the runtime threads call through this JS thread's queue
/// (`(kind, id, payload)`); it never keeps Node running by itself.
pub struct Callback {
    func: Raw<sys::napi_ref>,
    env: Raw<sys::napi_env>,
    queue: Arc<Queue>,
}

impl Callback {
    pub fn new(env: &Env, func: sys::napi_value) -> Result<Callback> {
        let raw_env = env.raw();
        let queue = queue(raw_env)?;
        let mut func_ref = ptr::null_mut();
        check(
            unsafe { sys::napi_create_reference(raw_env, func, 1, &mut func_ref) },
            "napi_create_reference",
        )?;
        Ok(Callback {
            func: Raw(func_ref),
            env: Raw(raw_env),
            queue,
        })
    }

    /// Queues a call; an exception it throws is an uncaught exception, as
    /// from any callback.
    pub fn call<T: ToNapiValue + Send + 'static>(&self, kind: String, id: f64, payload: T) {
        let func = Raw(self.func.get());
        self.queue.push(Item {
            op: false,
            run: Box::new(move |env| unsafe {
                let mut f = ptr::null_mut();
                let mut this = ptr::null_mut();
                let mut args = [ptr::null_mut(); 3];
                let ok = sys::napi_get_reference_value(env, func.get(), &mut f)
                    == sys::Status::napi_ok
                    && !f.is_null()
                    && sys::napi_get_undefined(env, &mut this) == sys::Status::napi_ok
                    && sys::napi_create_string_utf8(
                        env,
                        kind.as_ptr().cast(),
                        kind.len() as isize,
                        &mut args[0],
                    ) == sys::Status::napi_ok
                    && sys::napi_create_double(env, id, &mut args[1]) == sys::Status::napi_ok
                    && T::to_napi_value(env, payload).map(|v| args[2] = v).is_ok();
                if !ok {
                    return;
                }
                let mut result = ptr::null_mut();
                if sys::napi_call_function(env, this, f, 3, args.as_ptr(), &mut result)
                    != sys::Status::napi_ok
                {
                    let mut error = ptr::null_mut();
                    if sys::napi_get_and_clear_last_exception(env, &mut error)
                        == sys::Status::napi_ok
                        && !error.is_null()
                    {
                        sys::napi_fatal_exception(env, error);
                    }
                }
            }),
        });
    }
}

impl Drop for Callback {
    /// The reference is deleted on the JS thread: at once when dropped there
    /// (a finalizer, also while Node tears the environment down, when calling
    /// the thread-safe function from its own thread would deadlock), else at
    /// the JS thread's next drain.
    fn drop(&mut self) {
        let env = self.env.get();
        let on_js_thread = LOCAL
            .try_with(|local| {
                local
                    .try_borrow()
                    .is_ok_and(|l| l.as_ref().is_some_and(|l| l.env == env))
            })
            .unwrap_or(false);
        if on_js_thread {
            unsafe { sys::napi_delete_reference(env, self.func.get()) };
            return;
        }
        let func = Raw(self.func.get());
        self.queue.push(Item {
            op: false,
            run: Box::new(move |env| unsafe {
                sys::napi_delete_reference(env, func.get());
            }),
        });
    }
}
