//! A JS function that runtime threads call through its JS thread's settle
//! queue, so its calls keep their order relative to settled operations.

use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::ToNapiValue;
use napi::{sys, Env, Result};

use super::{check, queue, Item, Queue, Raw, LOCAL};

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

    /// Queues a call; `payload` becomes its JS value on the JS thread (where
    /// an `ErrorObject` is built as its error). An exception the call throws
    /// is an uncaught exception, as from any callback.
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
