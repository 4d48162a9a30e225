'use strict'

// Table-driven bad-input sweep: every wrong type and value at every public
// function, constructor and option of LockClient (adopt, isLocked, semaphore
// included), Semaphore, ReadWriteLock, Lock, withLock,
// DistributedLock and lockdog/redlock. Each case must end in a typed error
// (an Error whose code starts with ERR_), or in the caller's own error where the
// caller threw it, or succeed where the input is odd but valid — never crash,
// never hang (3 s per case), never leave a key behind.
//
// sweepRow() runs the sweep in a child process (so a crash is seen as one)
// against its own redis-server, then checks that no key is left.

const path = require('node:path')
const { spawn } = require('node:child_process')

const HANG_MS = 3000
const TYPED = (e) => e instanceof Error && typeof e.code === 'string' && /^ERR_/.test(e.code)
class UserError extends Error {
  constructor(m = 'user error') {
    super(m)
    this.user = true
  }
}

function cases(url) {
  const { LockClient, DistributedLock, withLock, LockError } = require('lockdog')
  const Redlock = require('lockdog/redlock')
  const C = []
  const add = (name, expect, run, extra = {}) => C.push({ name, expect, run, ...extra })
  const locks = new LockClient({ url, ttl: 1000, waitTimeout: 500, retryDelay: 10 })
  const closed = new LockClient({ url })
  const fn = () => 1
  const notNumbers = [null, '1000', true, {}, [], Symbol('s'), fn, 10n, new Date(0), 'NaN']
  const badNumbers = [NaN, -5, 1.5, 2 ** 53, Infinity, -Infinity]
  const notStrings = [null, 1, true, {}, [], Symbol('s'), fn, 10n, Buffer.from('x')]
  const notBool = [null, 1, 'yes', {}, fn]
  const show = (v) => {
    try {
      if (typeof v === 'symbol') return v.toString()
      if (typeof v === 'function') return 'fn'
      if (typeof v === 'bigint') return `${v}n`
      if (Buffer.isBuffer(v)) return 'Buffer'
      if (typeof v === 'number' && !Number.isFinite(v)) return String(v)
      const s = JSON.stringify(v)
      return s === undefined ? String(v) : s.length > 24 ? `${s.slice(0, 21)}...` : s
    } catch {
      return typeof v
    }
  }

  // --- keys ---------------------------------------------------------------
  const badKeys = [undefined, null, 42, {}, [], [''], ['a', 1], '', '\uD800lone', Buffer.from('k'), Symbol('k'),
    new String('k'), { toString: () => 'k' }, 'x'.repeat(64 * 1024 + 1), Array.from({ length: 1025 }, (_, i) => `k${i}`),
    [undefined], Object.assign(['a'], { 0: 1 })]
  const okKeys = ['\u0000\u0001\u00ff\r\n binary', '🔒 日本語 ключ', 'x'.repeat(64 * 1024), '*?[glob]', '__proto__', 'constructor', ['m1', 'm2', 'm1']]
  for (const k of badKeys) {
    add(`acquire(key=${show(k)})`, 'typed', () => locks.acquire(k))
    add(`tryAcquire(key=${show(k)})`, 'typed', () => locks.tryAcquire(k))
    add(`withLock(key=${show(k)})`, 'typed', () => locks.withLock(k, fn))
    // The constructor checks types; lengths are checked natively at acquire().
    add(`DistributedLock(url, key=${show(k)}).acquire()`, 'typed', () => new DistributedLock(url, k).acquire())
  }
  for (const k of okKeys) {
    add(`acquire+release(key=${show(k)})`, 'ok', async () => {
      const l = await locks.acquire(k, { ttl: 1000 })
      if ((await l.release()) !== true) throw new Error('release did not delete the key')
      return true
    })
    add(`withLock(key=${show(k)})`, 'ok', () => locks.withLock(k, () => 'v'))
  }

  // --- LockClient constructor ----------------------------------------------
  for (const o of [1, 'redis://x', true, [], Symbol('o'), fn, 10n]) add(`new LockClient(${show(o)})`, 'typed', () => new LockClient(o))
  const numberOpts = ['ttl', 'retryDelay', 'retryJitter', 'waitTimeout', 'maxHold', 'renewInterval', 'connectTimeout', 'commandTimeout', 'nodeTimeout', 'driftFactor', 'retryCount']
  for (const name of numberOpts) {
    for (const v of notNumbers) add(`new LockClient({${name}: ${show(v)}})`, 'typed', () => new LockClient({ url, [name]: v }))
    for (const v of badNumbers) {
      if (['retryCount', 'maxHold', 'waitTimeout'].includes(name) && v === Infinity) continue // documented: no limit
      add(`new LockClient({${name}: ${show(v)}})`, 'typed', () => new LockClient({ url, [name]: v }))
    }
  }
  for (const v of [0.5, 0.9, 1]) add(`new LockClient({driftFactor: ${v}})`, 'typed', () => new LockClient({ url, driftFactor: v }))
  for (const name of ['url', 'keyPrefix']) for (const v of notStrings) add(`new LockClient({${name}: ${show(v)}})`, 'typed', () => new LockClient({ [name]: v }))
  for (const v of ['', 'not a url', 'http://127.0.0.1:1', 'redis://', 'redis://127.0.0.1:99999', 'redis://[::1', 'unix://']) add(`new LockClient({url: ${show(v)}})`, 'typed', () => new LockClient({ url: v }))
  for (const v of [null, url, [], [1], [url, url], {}, [null], [url, '']]) add(`new LockClient({nodes: ${show(v)}})`, 'typed', () => new LockClient({ nodes: v }))
  for (const v of notBool) add(`new LockClient({autoRenew: ${show(v)}})`, 'typed', () => new LockClient({ url, autoRenew: v }))
  add('new LockClient({ttl: 100, renewInterval: 100})', 'typed', () => new LockClient({ url, ttl: 100, renewInterval: 100 }))
  add('new LockClient({tll: 1000}) (misspelt)', 'typed', () => new LockClient({ url, tll: 1000 }))
  // prototype tricks
  add('new LockClient(Object.create({ttl: -1})) (inherited: ignored)', 'ok', () => { new LockClient(Object.assign(Object.create({ ttl: -1 }), { url })).close(); return 1 })
  add('new LockClient(JSON "__proto__" own key)', 'typed', () => new LockClient(JSON.parse(`{"url": "${url}", "__proto__": {"ttl": 5}}`)))
  add('new LockClient({get ttl() {throw}})', 'user', () => new LockClient({ url, get ttl() { throw new UserError('getter') } }))
  add('new LockClient(Proxy ownKeys throws)', 'user', () => new LockClient(new Proxy({}, { ownKeys() { throw new UserError('ownKeys') } })))
  add('new LockClient(Object.create(null) with url)', 'ok', () => { const o = Object.create(null); o.url = url; new LockClient(o).close(); return 1 })
  add('LockClient() without new', 'typed|native', () => LockClient({ url }))

  // --- acquire / tryAcquire / withLock options ---------------------------------
  const acquireNumber = ['ttl', 'retryCount', 'retryDelay', 'retryJitter', 'waitTimeout', 'maxHold', 'renewInterval']
  for (const name of acquireNumber) {
    for (const v of [...notNumbers, ...badNumbers]) {
      if (['retryCount', 'maxHold', 'waitTimeout'].includes(name) && v === Infinity) continue
      add(`acquire(k, {${name}: ${show(v)}})`, 'typed', () => locks.acquire('bi:opt', { [name]: v }))
      add(`withLock(k, fn, {${name}: ${show(v)}})`, 'typed', () => locks.withLock('bi:opt', fn, { [name]: v }))
    }
  }
  for (const v of notBool) add(`acquire(k, {autoRenew: ${show(v)}})`, 'typed', () => locks.acquire('bi:opt', { autoRenew: v }))
  for (const v of [1, 'x', {}, new EventTarget(), { aborted: false, addEventListener() {} }]) add(`acquire(k, {signal: ${show(v)}})`, 'typed', () => locks.acquire('bi:opt', { signal: v }))
  for (const v of [1, 'x', {}, true]) add(`acquire(k, {onLost: ${show(v)}})`, 'typed', () => locks.acquire('bi:opt', { onLost: v }))
  for (const o of [1, 'fast', true, [], Symbol('o'), fn, 10n]) {
    add(`acquire(k, ${show(o)})`, 'typed', () => locks.acquire('bi:opt', o))
    add(`tryAcquire(k, ${show(o)})`, 'typed', () => locks.tryAcquire('bi:opt', o))
    add(`withLock(k, fn, ${show(o)})`, 'typed', () => locks.withLock('bi:opt', fn, o))
  }
  add('acquire(k, {tll: 1})', 'typed', () => locks.acquire('bi:opt', { tll: 1 }))
  add('acquire(k, already aborted signal)', 'typed', () => locks.acquire('bi:opt', { signal: AbortSignal.abort() }))
  add('acquire(k, signal aborting while waiting)', 'typed', async () => {
    const held = await locks.acquire('bi:wait')
    try {
      return await locks.acquire('bi:wait', { signal: AbortSignal.timeout(50), waitTimeout: 2000 })
    } finally {
      await held.release()
    }
  })
  add('acquire(k) held elsewhere → waitTimeout', 'typed', async () => {
    const held = await locks.acquire('bi:held')
    try {
      return await locks.acquire('bi:held', { waitTimeout: 100 })
    } finally {
      await held.release()
    }
  })
  add('acquire(k, Object.create({ttl: -1})) (inherited: ignored)', 'ok', async () => (await locks.acquire('bi:proto', Object.create({ ttl: -1 }))).release())
  add('acquire(k, {get ttl() {throw}})', 'user', () => locks.acquire('bi:opt', { get ttl() { throw new UserError('getter') } }))
  // A polluted Object.prototype must not reach the native layer (options are null-prototype).
  add('acquire with Object.prototype.ttl = -1 polluted', 'ok', async () => {
    Object.prototype.ttl = -1 // eslint-disable-line no-extend-native
    try {
      const l = await locks.acquire('bi:polluted')
      return await l.release()
    } finally {
      delete Object.prototype.ttl
    }
  })
  add('acquire(key array with a throwing getter)', 'user', () => {
    const a = ['a']
    Object.defineProperty(a, 0, { get() { throw new UserError('index') } })
    return locks.acquire(a)
  })

  // --- withLock fn -------------------------------------------------------------
  for (const f of [undefined, null, 1, 'fn', {}, Promise.resolve(), Symbol('f')]) add(`withLock(k, fn=${show(f)})`, 'typed', () => locks.withLock('bi:fn', f))
  add('withLock(fn throws synchronously)', 'user', () => locks.withLock('bi:fn', () => { throw new UserError('sync') }))
  add('withLock(async fn rejects)', 'user', () => locks.withLock('bi:fn', async () => { throw new UserError('async') }))
  add('withLock(fn returns a non-promise)', 'ok', async () => { if ((await locks.withLock('bi:fn', () => 42)) !== 42) throw new Error('lost the value'); return 42 })
  add('withLock(fn returns a thenable whose then throws)', 'user', () => locks.withLock('bi:fn', () => ({ then() { throw new UserError('then') } })))
  add('withLock(fn throws a non-Error)', 'user', async () => {
    try {
      await locks.withLock('bi:fn', () => { throw 'a string' }) // eslint-disable-line no-throw-literal
    } catch (e) {
      if (e === 'a string') throw new UserError('non-error passed through')
      throw e
    }
  })
  add('withLock(thenable never settles, maxHold 400): signal aborts, key lapses', 'ok', async () => {
    let signal
    const own = new LockClient({ url })
    own.withLock('bi:never', (s) => { signal = s; return { then() {} } }, { ttl: 200, maxHold: 400 })
    const t0 = performance.now()
    while (!signal && performance.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5))
    if (!signal) throw new Error('fn never ran')
    while (!signal.aborted && performance.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 10))
    if (!signal.aborted) throw new Error('signal not aborted after maxHold')
    if (!(signal.reason instanceof LockError) || signal.reason.code !== 'ERR_LOCK_LOST') throw new Error(`wrong reason ${signal.reason}`)
    await own.close()
    return true
  })

  // --- Lock methods ------------------------------------------------------------
  for (const v of [...notNumbers.filter((x) => x !== null), ...badNumbers, 0]) {
    add(`lock.extend(${show(v)})`, 'typed', async () => {
      const l = await locks.acquire('bi:ext')
      try {
        return await l.extend(v)
      } finally {
        await l.release()
      }
    })
  }
  add('lock.extend(null)', 'typed', async () => {
    const l = await locks.acquire('bi:ext')
    try {
      return await l.extend(null)
    } finally {
      await l.release()
    }
  })
  add('lock.extend() after release', 'typed', async () => {
    const l = await locks.acquire('bi:ext2')
    await l.release()
    return l.extend(1000)
  })
  add('lock.release() twice → false', 'ok', async () => {
    const l = await locks.acquire('bi:rel')
    await l.release()
    if ((await l.release()) !== false) throw new Error('second release was not false')
    return false
  })
  add('Lock.prototype.release.call({})', 'typed|native', () => require('lockdog').Lock.prototype.release.call({}))
  add('Lock.prototype.extend.call(null, 1000)', 'typed|native', () => require('lockdog').Lock.prototype.extend.call(null, 1000))

  // --- adopt / isLocked ------------------------------------------------------------
  for (const k of badKeys) add(`adopt(key=${show(k)}, tok)`, 'typed', () => locks.adopt(k, 'tok'))
  for (const t of [...notStrings, undefined, '', 'x'.repeat(1025)]) add(`adopt(k, token=${show(t)})`, 'typed', () => locks.adopt('bi:ad', t))
  for (const o of [1, 'x', true, [], fn, { waitTimeout: 10 }, { signal: new AbortController().signal }, { retryCount: 1 }]) {
    add(`adopt(k, tok, options=${show(o)})`, 'typed', () => locks.adopt('bi:ad', 'tok', o))
  }
  for (const v of [...notNumbers, ...badNumbers, 0]) add(`adopt(k, tok, {ttl: ${show(v)}})`, 'typed', () => locks.adopt('bi:ad', 'tok', { ttl: v }))
  add('adopt(missing key) → ERR_LOCK_LOST, no key created', 'typed', () => locks.adopt('bi:ad:none', 'tok'))
  add('adopt(held by another token) → ERR_LOCK_LOST', 'typed', async () => {
    const l = await locks.acquire('bi:ad:held')
    try {
      return await locks.adopt('bi:ad:held', 'not-its-token')
    } finally {
      await l.release()
    }
  })
  add('adopt(own token) then release', 'ok', async () => {
    const l = await locks.acquire('bi:ad:own', { autoRenew: false, ttl: 1000 })
    const again = await locks.adopt('bi:ad:own', l.token, { ttl: 1000 })
    if ((await again.release()) !== true) throw new Error('adopted lock did not release')
    await l.release()
    return 1
  })
  for (const k of [...notStrings, undefined, '']) add(`isLocked(key=${show(k)})`, 'typed', () => locks.isLocked(k))
  add('isLocked(absent) → false', 'ok', async () => {
    if ((await locks.isLocked('bi:ad:absent')) !== false) throw new Error('an absent key was reported locked')
    return false
  })

  // --- semaphore -------------------------------------------------------------------
  for (const k of [undefined, null, 42, {}, [], ['a'], '', Symbol('k')]) add(`semaphore(key=${show(k)})`, 'typed', () => locks.semaphore(k, { limit: 2 }))
  for (const o of [undefined, null, 1, 'x', [], {}, { limit: 2, permits: 1 }, { limit: 2, signal: new AbortController().signal }]) {
    add(`semaphore(k, options=${show(o)})`, 'typed', () => locks.semaphore('bi:sem', o))
  }
  for (const v of [...notNumbers, ...badNumbers, 0, 100001]) add(`semaphore(k, {limit: ${show(v)}})`, 'typed', () => locks.semaphore('bi:sem', { limit: v }))
  const sem = locks.semaphore('bi:sem', { limit: 3, ttl: 1000 })
  for (const v of [...notNumbers, ...badNumbers, 0, 4]) {
    add(`sem.acquire({permits: ${show(v)}})`, 'typed', () => sem.acquire({ permits: v }))
    add(`sem.tryAcquire({permits: ${show(v)}})`, 'typed', () => sem.tryAcquire({ permits: v }))
    add(`sem.withPermit(fn, {permits: ${show(v)}})`, 'typed', () => sem.withPermit(fn, { permits: v }))
  }
  for (const o of [1, 'x', true, [], fn, { limit: 2 }, { nope: 1 }]) add(`sem.acquire(${show(o)})`, 'typed', () => sem.acquire(o))
  for (const f of [undefined, null, 'fn', {}, 1]) add(`sem.withPermit(${show(f)})`, 'typed', () => sem.withPermit(f))
  add('sem.withPermit fn throws synchronously', 'user', () => sem.withPermit(() => { throw new UserError('fn') }))
  add('sem.acquire(permits 3 of 3) then release', 'ok', async () => {
    const l = await sem.acquire({ permits: 3 })
    if ((await l.release()) !== true) throw new Error('release failed')
    return 1
  })
  add('sem full → ERR_LOCK_TIMEOUT', 'typed', async () => {
    const l = await sem.acquire({ permits: 2 })
    try {
      return await sem.acquire({ permits: 2, waitTimeout: 50 })
    } finally {
      await l.release()
    }
  })
  add('semaphore on a plain lock key → typed error', 'typed', async () => {
    const l = await locks.acquire('bi:sem:plain')
    try {
      return await locks.semaphore('bi:sem:plain', { limit: 2 }).acquire({ waitTimeout: 100 })
    } finally {
      await l.release()
    }
  })

  // --- read-write lock ---------------------------------------------------------------
  for (const k of [undefined, null, 42, {}, [], ['a'], '', Symbol('k')]) add(`readWriteLock(key=${show(k)})`, 'typed', () => locks.readWriteLock(k))
  for (const o of [1, 'x', true, [], fn, { limit: 2 }, { signal: new AbortController().signal }]) add(`readWriteLock(k, options=${show(o)})`, 'typed', () => locks.readWriteLock('bi:rw', o))
  const rw = locks.readWriteLock('bi:rw', { ttl: 1000 })
  for (const m of ['readLock', 'writeLock', 'tryReadLock', 'tryWriteLock']) {
    for (const o of [1, 'x', [], { permits: 1 }, { ttl: 0 }, { ttl: 1.5 }, { waitTimeout: -1 }]) add(`rw.${m}(${show(o)})`, 'typed', () => rw[m](o))
  }
  for (const m of ['withReadLock', 'withWriteLock']) {
    for (const f of [undefined, null, 'fn', {}, 1]) add(`rw.${m}(${show(f)})`, 'typed', () => rw[m](f))
    add(`rw.${m} fn throws synchronously`, 'user', () => rw[m](() => { throw new UserError('fn') }))
  }
  add('rw: writer while a reader holds → ERR_LOCK_TIMEOUT', 'typed', async () => {
    const r = await rw.readLock()
    try {
      return await rw.writeLock({ waitTimeout: 50 })
    } finally {
      await r.release()
    }
  })
  add('rw: read, then write, then release', 'ok', async () => {
    await (await rw.readLock()).release()
    const w = await rw.writeLock({ waitTimeout: 1000 })
    if ((await w.release()) !== true) throw new Error('writer release failed')
    return 1
  })

  // --- fair semaphores and read-write locks --------------------------------------------
  for (const v of [null, 1, 0, 'yes', {}, [], fn]) {
    add(`semaphore(k, {limit: 2, fair: ${show(v)}})`, 'typed', () => locks.semaphore('bi:fsem', { limit: 2, fair: v }))
    add(`sem.acquire({fair: ${show(v)}})`, 'typed', () => sem.acquire({ fair: v }))
    add(`readWriteLock(k, {fair: ${show(v)}})`, 'typed', () => locks.readWriteLock('bi:frw', { fair: v }))
    add(`rw.readLock({fair: ${show(v)}})`, 'typed', () => rw.readLock({ fair: v }))
  }
  const fsem = locks.semaphore('bi:fsem', { limit: 3, ttl: 1000, fair: true })
  for (const v of [0, 4, 1.5]) add(`fair sem.acquire({permits: ${show(v)}})`, 'typed', () => fsem.acquire({ permits: v }))
  add('fair sem: full → ERR_LOCK_TIMEOUT, and the line is left', 'typed', async () => {
    const l = await fsem.acquire({ permits: 3 })
    try {
      return await fsem.acquire({ waitTimeout: 50 })
    } finally {
      await l.release()
    }
  })
  add('fair rw: writer while a reader holds → ERR_LOCK_TIMEOUT', 'typed', async () => {
    const frw = locks.readWriteLock('bi:frw', { ttl: 1000, fair: true })
    const r = await frw.readLock()
    try {
      return await frw.writeLock({ waitTimeout: 50 })
    } finally {
      await r.release()
    }
  })

  // --- closed client -------------------------------------------------------------
  add('closed.close() then acquire', 'typed', async () => { await closed.close(); return closed.acquire('bi:closed') })
  add('closed: tryAcquire', 'typed', async () => { await closed.close(); return closed.tryAcquire('bi:closed') })
  add('closed: withLock', 'typed', async () => { await closed.close(); return closed.withLock('bi:closed', fn) })
  add('closed: close() again', 'ok', async () => { await closed.close(); await closed.close(); return 1 })
  add('closed: extend a lock of a closed client', 'typed', async () => {
    const own = new LockClient({ url })
    const l = await own.acquire('bi:cl')
    await own.close()
    return l.extend(1000)
  })
  add('closed: release a lock of a closed client → false', 'ok', async () => {
    const own = new LockClient({ url })
    const l = await own.acquire('bi:cl2')
    await own.close()
    if ((await l.release()) !== false) throw new Error('release after close was not false')
    return 1
  })
  add('closed: acquire on a client closed mid-wait', 'typed', async () => {
    const own = new LockClient({ url })
    const held = await locks.acquire('bi:mid')
    const p = own.acquire('bi:mid', { waitTimeout: 2000 })
    setTimeout(() => own.close(), 50)
    try {
      return await p
    } finally {
      await held.release()
    }
  })
  add('unreachable node → ERR_LOCK_CONNECTION', 'typed', () => new LockClient({ url: 'redis://127.0.0.1:1', connectTimeout: 200, waitTimeout: 500 }).acquire('bi:down'))

  // --- DistributedLock / module withLock ---------------------------------------------
  for (const r of [undefined, null, 1, true, {}, [], fn, Symbol('r')]) add(`new DistributedLock(redis=${show(r)})`, 'typed', () => new DistributedLock(r, 'k'))
  for (const t of notNumbers.filter((x) => x !== null)) add(`new DistributedLock(url, k, ttl=${show(t)})`, 'typed', () => new DistributedLock(url, 'k', t))
  add('new DistributedLock(url, k, null)', 'typed', () => new DistributedLock(url, 'k', null))
  for (const t of badNumbers) add(`DistributedLock(url, k, ${show(t)}).acquire()`, 'typed', () => new DistributedLock(url, 'bi:dl', t).acquire())
  add('DistributedLock acquire/extend/release round trip', 'ok', async () => {
    const d = new DistributedLock(url, 'bi:dl2', 1000)
    if (!(await d.acquire())) throw new Error('not acquired')
    await d.extend(1000)
    return d.release()
  })
  add('DistributedLock.extend("x")', 'typed', async () => {
    const d = new DistributedLock(url, 'bi:dl3', 1000)
    await d.acquire()
    try {
      return await d.extend('x')
    } finally {
      await d.release()
    }
  })
  add('withLock(url, k, 1)', 'typed', () => withLock(url, 'bi:w', 1))
  add('withLock(url, k, fn, "100")', 'typed', () => withLock(url, 'bi:w', fn, '100'))
  add('withLock(url, k, fn, -1)', 'typed', () => withLock(url, 'bi:w', fn, -1))
  add('withLock(1, 2, 3)', 'typed', () => withLock(1, 2, 3))
  add('withLock()', 'typed', () => withLock())
  add('withLock({}, k, fn)', 'typed', () => withLock({}, 'bi:w', fn))

  // --- lockdog/redlock ---------------------------------------------------------------
  for (const c of [undefined, null, 'redis://x', 1, {}, [], [1], [null]]) add(`new Redlock(${show(c)})`, 'typed', () => new Redlock(c))
  // As in redlock, clients are a Set: the same client twice is one member.
  add('new Redlock([url, url])', 'ok', () => new Redlock([url, url]).quit())
  for (const s of [5, 'x', [], fn]) add(`new Redlock([url], ${show(s)})`, 'typed', () => new Redlock([url], s))
  for (const [k, v] of [['retryCount', 'x'], ['retryDelay', null], ['driftFactor', 2], ['driftFactor', NaN], ['retryJitter', -1], ['retryDelay', 1.5]]) {
    add(`new Redlock([url], {${k}: ${show(v)}})`, 'typed', async () => {
      const rl = new Redlock([url], { [k]: v })
      try {
        return await rl.acquire(['bi:rl:s'], 1000)
      } finally {
        await rl.quit()
      }
    })
  }
  const rl = new Redlock([url], { retryCount: 2, retryDelay: 20 })
  for (const [res, d] of [['bi:rl', '100'], [['bi:rl'], -1], [[1], 100], [['bi:rl'], NaN], [null, 100], [['bi:rl'], Infinity], [['bi:rl'], 2 ** 53], [[''], 100]]) {
    add(`redlock.acquire(${show(res)}, ${show(d)})`, 'typed', () => rl.acquire(res, d))
  }
  // As in redlock: no resources is an empty lock, and any safe integer is a duration.
  add('redlock.acquire([], 100)', 'ok', () => rl.acquire([], 100))
  add('redlock.acquire(r, 2 ** 31)', 'ok', () => rl.acquire(['bi:rl:big'], 2 ** 31))
  for (const s of [5, 'x', { retryCount: 'x' }, { retryDelay: -1 }]) add(`redlock.acquire(r, 1000, ${show(s)})`, 'typed', () => rl.acquire(['bi:rl'], 1000, s))
  for (const l of [undefined, null, {}, { value: 'x', resources: ['bi:rl'] }, 'lock']) {
    add(`redlock.release(${show(l)})`, 'typed', () => rl.release(l))
    add(`redlock.extend(${show(l)}, 100)`, 'typed', () => rl.extend(l, 100))
  }
  add('redlock.extend(lock, "x")', 'typed', async () => {
    const l = await rl.acquire(['bi:rl:x'], 1000)
    try {
      return await rl.extend(l, 'x')
    } finally {
      await l.release()
    }
  })
  add('redlock.extend(released lock, 1000)', 'typed', async () => {
    const l = await rl.acquire(['bi:rl:y'], 1000)
    await l.release()
    return rl.extend(l, 1000)
  })
  add('redlock.acquire held → ExecutionError', 'typed', async () => {
    const l = await rl.acquire(['bi:rl:h'], 1000)
    try {
      return await rl.acquire(['bi:rl:h'], 1000, { retryCount: 1, retryDelay: 10 })
    } finally {
      await l.release()
    }
  })
  for (const r of [undefined, null, 'fn', {}, 1]) add(`redlock.using(r, 1000, routine=${show(r)})`, 'typed', () => rl.using(['bi:rl:u'], 1000, r))
  add('redlock.using(r, 1000, {}, null)', 'typed', () => rl.using(['bi:rl:u'], 1000, {}, null))
  add('redlock.using(r, "x", fn)', 'typed', () => rl.using(['bi:rl:u'], 'x', fn))
  add('redlock.using routine throws synchronously', 'user', () => rl.using(['bi:rl:u'], 1000, () => { throw new UserError('routine') }))
  add('redlock.using routine resolves', 'ok', async () => { if ((await rl.using(['bi:rl:u'], 1000, async () => 7)) !== 7) throw new Error('value lost'); return 7 })
  add('redlock after quit: acquire', 'typed', async () => {
    const q = new Redlock([url])
    await q.quit()
    return q.acquire(['bi:rl:q'], 1000)
  })

  return { C, locks, rl }
}

async function runCase(c) {
  let timer
  const hang = new Promise((resolve) => { timer = setTimeout(() => resolve({ kind: 'hang' }), HANG_MS) })
  let outcome
  try {
    const v = c.run()
    outcome = await Promise.race([Promise.resolve(v).then((value) => ({ kind: 'value', value }), (e) => ({ kind: 'error', e })), hang])
  } catch (e) {
    outcome = { kind: 'error', e, sync: true }
  } finally {
    clearTimeout(timer)
  }
  if (outcome.kind === 'value' && outcome.value && typeof outcome.value.release === 'function') await outcome.value.release().catch(() => {})
  const e = outcome.e
  let ok
  if (outcome.kind === 'hang') ok = false
  else if (c.expect === 'ok') ok = outcome.kind === 'value'
  else if (c.expect === 'user') ok = outcome.kind === 'error' && e instanceof UserError
  else if (c.expect === 'typed') ok = outcome.kind === 'error' && TYPED(e)
  // A prototype method called on a foreign `this`: a TypeError (Node's own, or typed).
  else if (c.expect === 'typed|native') ok = outcome.kind === 'error' && (TYPED(e) || e instanceof TypeError)
  const got = outcome.kind === 'hang' ? `hung > ${HANG_MS} ms` : outcome.kind === 'value' ? 'resolved' : `${e && e.name}${e && e.code ? ` ${e.code}` : ''}: ${String(e && e.message).slice(0, 100)}`
  return { name: c.name, expect: c.expect, ok, got, sync: Boolean(outcome.sync), knownBug: c.knownBug }
}

async function child(url) {
  const problems = []
  process.on('unhandledRejection', (e) => problems.push(`unhandledRejection: ${e && e.stack}`))
  process.on('uncaughtException', (e) => problems.push(`uncaughtException: ${e && e.stack}`))
  process.on('warning', (w) => problems.push(`warning: ${w && w.message}`))
  const { C, locks, rl } = cases(url)
  const results = []
  for (const c of C) results.push(await runCase(c))
  await locks.close()
  await rl.quit()
  await new Promise((r) => setTimeout(r, 200))
  process.stdout.write(`${JSON.stringify({ results, problems })}\n`)
}

/** Runs the sweep in a child process; returns one result row for the suite. */
async function sweepRow() {
  const { startRedis, waitFor } = require('../../scripts/local-redis')
  const Redis = require('ioredis')
  const server = await startRedis()
  const r = new Redis({ host: '127.0.0.1', port: server.port })
  const row = { id: 'badinput', name: 'bad-input sweep', topology: 'single', expect: 'safe', violations: [] }
  const t0 = performance.now()
  try {
    const proc = spawn(process.execPath, [__filename, '--child', server.url], { cwd: path.join(__dirname, '..', '..'), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    proc.stdout.on('data', (d) => { out += d })
    proc.stderr.on('data', (d) => { err += d })
    let timer
    const code = await Promise.race([
      new Promise((resolve) => proc.on('exit', (c, s) => resolve(s || c))),
      new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), 120000) }),
    ])
    clearTimeout(timer)
    if (code === 'timeout') {
      process.kill(proc.pid, 'SIGKILL')
      row.violations.push('the sweep did not finish in 120 s')
    } else if (code !== 0) row.violations.push(`the sweep process crashed (${code}): ${err.slice(-800)}`)
    let parsed = null
    try {
      parsed = JSON.parse(out.trim().split('\n').pop())
    } catch {}
    if (parsed) {
      // A known, reported bug is listed, not failed; once fixed it says so.
      const known = parsed.results.filter((x) => x.knownBug)
      row.knownBugs = known.map((x) => ({ name: x.name, still: !x.ok, bug: x.knownBug, got: x.got }))
      for (const k of row.knownBugs) row.notes = [...(row.notes || []), `${k.still ? 'KNOWN BUG' : 'KNOWN BUG FIXED (make it a plain case)'}: ${k.name}: ${k.bug}`]
      const bad = parsed.results.filter((x) => !x.ok && !x.knownBug)
      row.cases = parsed.results.length
      row.typed = parsed.results.filter((x) => x.ok && x.expect !== 'ok').length
      row.failures = bad
      for (const b of bad) row.violations.push(`${b.name}: expected ${b.expect}, got ${b.got}`)
      for (const p of parsed.problems) row.violations.push(p.slice(0, 300))
    } else if (code === 0) row.violations.push(`no result from the sweep: ${out.slice(-300)} ${err.slice(-300)}`)
    let left = []
    try {
      await waitFor(async () => (left = await r.keys('*')).length === 0, { timeout: 2500, what: 'no keys left' })
    } catch {
      row.violations.push(`keys left behind: ${left.slice(0, 5).map((k) => k.slice(0, 40)).join(', ')}`)
    }
  } finally {
    r.disconnect()
    await server.stop()
  }
  row.ops = row.cases
  row.seconds = Math.round((performance.now() - t0) / 100) / 10
  row.pass = row.violations.length === 0
  return row
}

if (require.main === module && process.argv[2] === '--child') {
  child(process.argv[3]).catch((e) => {
    console.error(e)
    process.exit(1)
  })
}

module.exports = { sweepRow, cases }
