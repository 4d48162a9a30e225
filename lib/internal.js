'use strict'

// What the Lock, the LockClient, semaphores and read-write locks share: the
// symbols of their internal methods, the diagnostics channels, and a few
// helpers. It requires none of them, so none of them forms a require cycle.

const diagnostics = require('node:diagnostics_channel')
const binding = require('../binding.js')
const { LockError } = require('./errors')

/**
 * The JS thread's own acquire (one key, a client on the JS-loop driver) and
 * release: the same native code without napi-rs's per-call glue.
 */
const hot = typeof binding.hotCalls === 'function' ? binding.hotCalls() : null

/** A lock's signal keeps its Lock reachable under this symbol. */
const kLock = Symbol('lockdog.lock')
/** Client: a release found the key gone or another owner's (`[kReport](err, lock)`). */
const kReport = Symbol('lockdog.reportLoss')
/** Client: the lock was released or handed over; no loss event needs to find it (`[kForget](id)`). */
const kForget = Symbol('lockdog.forget')
/** Lock: the error that ended it before its holder released it (loss or close), or null. */
const kEnd = Symbol('lockdog.end')
/** Lock: `close()` ended the locks its client held: tell what ended it (`[kEnded]()`). */
const kEnded = Symbol('lockdog.ended')
/** Lock: a loss of it was reported (`[kLost](err)`). */
const kLost = Symbol('lockdog.lost')
/** Client: takes another kind of lock (`[kAcquireWith](keys, options, kind, signal, onLost)`). */
const kAcquireWith = Symbol('lockdog.acquireWith')
/** Client: withLock around any acquisition (`[kWithLock](acquiring, fn)`). */
const kWithLock = Symbol('lockdog.withLock')
/** Client: the native client. */
const kNative = Symbol('lockdog.native')
/** Client: its `fair` option, the default of every acquisition. */
const kFair = Symbol('lockdog.fair')

/** `diagnostics_channel` publications, for tracing tools. */
const channels = {
  acquire: diagnostics.channel('lockdog:acquire'),
  release: diagnostics.channel('lockdog:release'),
  renew: diagnostics.channel('lockdog:renew'),
  lost: diagnostics.channel('lockdog:lost'),
}

/** A user callback's error, thrown where nothing can catch it but the process. */
function rethrowLater(err) {
  process.nextTick(() => {
    throw err
  })
}

/** One attempt's outcome as `tryAcquire` resolves it: null when another owner holds it. */
function takenAsNull(pending) {
  return pending.catch((e) => {
    if (e && e.code === 'ERR_LOCK_TAKEN') return null
    throw e
  })
}

/** An acquisition whose signal had aborted before it started. */
function abortedError(keys, signal) {
  return new LockError('ERR_LOCK_ABORTED', `acquiring lock "${keys.join(', ')}" was aborted`, {
    key: keys.join(', '),
    cause: signal.reason,
  })
}

/** One 'abort' listener per AbortSignal, however many acquires share it. */
const signalLinks = new WeakMap()

/** Cancels `cancel` (a native CancelHandle) when `signal` aborts; returns the unlink function. */
function linkSignal(signal, cancel) {
  let link = signalLinks.get(signal)
  if (!link) {
    const handles = new Set()
    const onAbort = () => {
      signalLinks.delete(signal)
      for (const h of handles) h.cancel()
    }
    link = { handles, onAbort }
    signalLinks.set(signal, link)
    signal.addEventListener('abort', onAbort, { once: true })
  }
  link.handles.add(cancel)
  return () => {
    link.handles.delete(cancel)
    if (link.handles.size === 0 && signalLinks.get(signal) === link) {
      signalLinks.delete(signal)
      signal.removeEventListener('abort', link.onAbort)
    }
  }
}

/** Resolves once every promise of `running` settled, or after `ms`, whichever comes first. */
async function settledWithin(running, ms) {
  let timer
  await Promise.race([
    Promise.allSettled(running),
    new Promise((resolve) => { timer = setTimeout(resolve, ms) }),
  ])
  clearTimeout(timer)
}

module.exports = {
  hot,
  settledWithin,
  kLock,
  kReport,
  kForget,
  kEnd,
  kEnded,
  kLost,
  kAcquireWith,
  kWithLock,
  kNative,
  kFair,
  channels,
  rethrowLater,
  takenAsNull,
  abortedError,
  linkSignal,
}
