//! The few libuv functions the fast path needs, found at run time in the
//! process (Node exports libuv to addons); without them there is no fast path.

use std::alloc::Layout;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

pub type Handle = *mut c_void;
pub type PollCb = unsafe extern "C" fn(Handle, c_int, c_int);
pub type TimerCb = unsafe extern "C" fn(Handle);
pub type PrepareCb = unsafe extern "C" fn(Handle);
pub type CloseCb = unsafe extern "C" fn(Handle);

pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;
pub const DISCONNECT: c_int = 4;
const UV_POLL: c_int = 8;
const UV_PREPARE: c_int = 9;
const UV_TIMER: c_int = 13;

type PollInit = unsafe extern "C" fn(*mut c_void, Handle, c_int) -> c_int;
type PollStart = unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int;
type TimerInit = unsafe extern "C" fn(*mut c_void, Handle) -> c_int;
type TimerStart = unsafe extern "C" fn(Handle, TimerCb, u64, u64) -> c_int;
type PrepareStart = unsafe extern "C" fn(Handle, PrepareCb) -> c_int;
type Stop = unsafe extern "C" fn(Handle) -> c_int;
type Close = unsafe extern "C" fn(Handle, Option<CloseCb>);
type Ref = unsafe extern "C" fn(Handle);
type HandleSize = unsafe extern "C" fn(c_int) -> usize;

pub struct Uv {
    poll_init_socket: PollInit,
    poll_start: PollStart,
    timer_init: TimerInit,
    timer_start: TimerStart,
    timer_stop: Stop,
    prepare_init: TimerInit,
    prepare_start: PrepareStart,
    prepare_stop: Stop,
    close: Close,
    ref_: Ref,
    unref: Ref,
    poll_size: usize,
    timer_size: usize,
    prepare_size: usize,
}

unsafe fn find(name: &CStr) -> Option<*mut c_void> {
    let f = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
    (!f.is_null()).then_some(f)
}

/// libuv as found in this process, if all of it is there.
pub fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| unsafe {
        let handle_size = std::mem::transmute::<*mut c_void, HandleSize>(find(c"uv_handle_size")?);
        Some(Uv {
            poll_init_socket: std::mem::transmute::<*mut c_void, PollInit>(find(
                c"uv_poll_init_socket",
            )?),
            poll_start: std::mem::transmute::<*mut c_void, PollStart>(find(c"uv_poll_start")?),
            timer_init: std::mem::transmute::<*mut c_void, TimerInit>(find(c"uv_timer_init")?),
            timer_start: std::mem::transmute::<*mut c_void, TimerStart>(find(c"uv_timer_start")?),
            timer_stop: std::mem::transmute::<*mut c_void, Stop>(find(c"uv_timer_stop")?),
            prepare_init: std::mem::transmute::<*mut c_void, TimerInit>(find(c"uv_prepare_init")?),
            prepare_start: std::mem::transmute::<*mut c_void, PrepareStart>(find(
                c"uv_prepare_start",
            )?),
            prepare_stop: std::mem::transmute::<*mut c_void, Stop>(find(c"uv_prepare_stop")?),
            close: std::mem::transmute::<*mut c_void, Close>(find(c"uv_close")?),
            ref_: std::mem::transmute::<*mut c_void, Ref>(find(c"uv_ref")?),
            unref: std::mem::transmute::<*mut c_void, Ref>(find(c"uv_unref")?),
            poll_size: handle_size(UV_POLL),
            timer_size: handle_size(UV_TIMER),
            prepare_size: handle_size(UV_PREPARE),
        })
        .filter(|uv| uv.poll_size > 0 && uv.timer_size > 0 && uv.prepare_size > 0)
    })
    .as_ref()
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size.max(64), 16).unwrap_or(Layout::new::<[u128; 64]>())
}

impl Uv {
    /// A zeroed handle of `size` bytes; freed by [`Uv::free`].
    fn alloc(size: usize) -> Handle {
        unsafe { std::alloc::alloc_zeroed(layout(size)).cast() }
    }

    /// Frees a closed poll handle.
    pub unsafe fn free_poll(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.poll_size));
    }

    pub unsafe fn free_timer(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.timer_size));
    }

    pub unsafe fn free_prepare(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.prepare_size));
    }

    /// A prepare handle (its callback runs before each wait of the loop),
    /// started, not holding the loop alive.
    pub unsafe fn prepare(&self, uv_loop: *mut c_void, cb: PrepareCb) -> Option<Handle> {
        let h = Self::alloc(self.prepare_size);
        if h.is_null() {
            return None;
        }
        if (self.prepare_init)(uv_loop, h) != 0 {
            self.free_prepare(h);
            return None;
        }
        if (self.prepare_start)(h, cb) != 0 {
            // Initialised: it is closed as any handle, then freed.
            self.close(h, free_prepare_cb);
            return None;
        }
        (self.unref)(h);
        Some(h)
    }

    pub unsafe fn prepare_stop(&self, h: Handle) {
        (self.prepare_stop)(h);
    }

    /// A poll handle on socket `fd` of `uv_loop` (None when libuv refuses it).
    pub unsafe fn poll(&self, uv_loop: *mut c_void, fd: c_int) -> Option<Handle> {
        let h = Self::alloc(self.poll_size);
        if h.is_null() {
            return None;
        }
        if (self.poll_init_socket)(uv_loop, h, fd) != 0 {
            self.free_poll(h);
            return None;
        }
        Some(h)
    }

    pub unsafe fn timer(&self, uv_loop: *mut c_void) -> Option<Handle> {
        let h = Self::alloc(self.timer_size);
        if h.is_null() {
            return None;
        }
        if (self.timer_init)(uv_loop, h) != 0 {
            self.free_timer(h);
            return None;
        }
        Some(h)
    }

    pub unsafe fn poll_start(&self, h: Handle, events: c_int, cb: PollCb) -> bool {
        (self.poll_start)(h, events, cb) == 0
    }

    pub unsafe fn timer_start(&self, h: Handle, cb: TimerCb, ms: u64) {
        (self.timer_start)(h, cb, ms, 0);
    }

    pub unsafe fn timer_stop(&self, h: Handle) {
        (self.timer_stop)(h);
    }

    pub unsafe fn close(&self, h: Handle, cb: CloseCb) {
        (self.close)(h, Some(cb));
    }

    pub unsafe fn set_ref(&self, h: Handle, on: bool) {
        if on {
            (self.ref_)(h)
        } else {
            (self.unref)(h)
        }
    }
}

unsafe extern "C" fn free_prepare_cb(h: Handle) {
    if let Some(uv) = uv() {
        uv.free_prepare(h);
    }
}

/// A handle's `data` pointer: the first field of every libuv handle.
pub unsafe fn data(h: Handle) -> *mut c_void {
    *(h as *mut *mut c_void)
}

pub unsafe fn set_data(h: Handle, data: *mut c_void) {
    *(h as *mut *mut c_void) = data;
}
