'use strict'

// The fault scenarios. Each one starts its own redis-server processes (behind
// proxies), runs worker processes, injects its fault, and returns figures plus
// the list of violations the checker found. `expect: 'unsafe'` marks runs where
// the specification says the lock is NOT safe (or a broken build is loaded):
// those pass only when the checker does report a violation.

const { Cluster, now } = require('./cluster')
const { Session, sleep, within } = require('./harness')
const { check, percentile, ms, sentAt } = require('./checker')

const PREFIX = 'f:'
const SLACK = 150 // ms of scheduling noise tolerated on timing contracts (2 cores, many processes)

const T = (tier, short, full) => (tier === 'full' ? full : short)
const drift = (ttl) => ttl * 0.01 + 2

function summary(values) {
  return { n: values.length, p50: percentile(values, 50), p99: percentile(values, 99), max: values.length ? Math.round(Math.max(...values) * 100) / 100 : null }
}

/** Stops the workers and runs every generic check. */
async function finish(ctx, keys, { maxTtl, excuse = () => false, excuseLost = () => 0, allowLosses = true } = {}) {
  const { sess, cluster } = ctx
  const stuck = await sess.stopAll()
  const finals = await sess.finals(keys)
  const seen = cluster.tokensSeen()
  const report = check(sess.events, { base: sess.base, finals, deaths: sess.deaths, seen })
  const orphans = await cluster.waitNoLeftovers(PREFIX, maxTtl + 1000)
  const violations = []
  const realOverlaps = report.overlaps.filter((o) => !excuse(o, report))
  if (realOverlaps.length) violations.push(`overlap: ${realOverlaps.length} pair(s), longest ${Math.max(...realOverlaps.map((o) => o.ms)).toFixed(1)} ms`)
  // Excused means reported, not ignored: every overlap, excused or not, must be
  // matched by a loss told to the earlier holder (its signal or onLost, or a
  // withLock rejection with ERR_LOCK_LOST).
  const byTok = new Map(report.intervals.map((iv) => [iv.tok, iv]))
  const unreported = report.overlaps.filter((o) => !toldOfLoss(earlierHolder(o, byTok, seen)))
  if (unreported.length) violations.push(`overlap not reported to the earlier holder: ${unreported.length} pair(s) (${unreported.slice(0, 3).map((o) => `${o.wa} on ${o.k}`).join(', ')})`)
  if (report.excess.length) violations.push(`overlap beyond the semaphore's limit: ${report.excess.length} time(s), worst ${Math.max(...report.excess.map((x) => x.held))} permits of ${report.excess[0].limit} held (${JSON.stringify(report.excess.slice(0, 2))})`)
  const excusedLost = Math.min(report.lostUpdates, excuseLost(report))
  if (report.lostUpdates - excusedLost > 0) violations.push(`lost updates: ${report.lostUpdates - excusedLost}${excusedLost ? ` (+${excusedLost} excused)` : ''}`)
  if (report.doubleWrites) violations.push(`double execution: ${report.doubleWrites} increment(s) applied more often than logged`)
  if (report.validity.length) violations.push(`validity bound: ${report.validity.length} of ${report.bounded} lock(s) granted more than ttl − elapsed − drift (worst +${Math.max(...report.validity.map((v) => v.overBy)).toFixed(2)} ms; ${JSON.stringify(report.validity.slice(0, 2))})`)
  if (report.writesAfterEnd.length) violations.push(`writes after belief end: ${report.writesAfterEnd.length}`)
  const errs = report.fatal
  if (errs.length) violations.push(`worker fatal/warning: ${errs.map((e) => e.msg || e.kind).join(' | ').slice(0, 300)}`)
  const crashes = sess.crashes()
  if (crashes.length) violations.push(`worker crashed: ${JSON.stringify(crashes).slice(0, 400)}`)
  if (stuck.length) violations.push(`workers did not stop: ${stuck.join(', ')}`)
  if (orphans.length) violations.push(`orphaned lock keys: ${orphans.length} (${JSON.stringify(orphans.slice(0, 3))})`)
  const untyped = report.acquireErrors.filter((e) => !/^ERR_LOCK_/.test(e.code))
  if (untyped.length) violations.push(`untyped acquire errors: ${[...new Set(untyped.map((e) => e.code))].join(', ')}`)
  if (!allowLosses && report.losses) violations.push(`false loss: ${report.losses} lock(s) reported lost while validity remained`)
  return { report, violations, realOverlaps, unreported, orphans }
}

/**
 * Of two overlapping holders, the one whose lock was taken from it: the one
 * whose winning request reached the nodes first (the later one could only win
 * once the earlier one's key was gone). When a worker logs its acquisition
 * late (its process stalled between the reply and the log line), the order
 * of the log lines is not the order on the server; the proxies' sightings
 * are. Without a sighting of both, the one that logged first.
 */
function earlierHolder(o, byTok, seen) {
  const a = byTok.get(o.a)
  const b = byTok.get(o.b)
  if (!a || !b) return a
  const Ta = sentAt(seen, a.tok, a.t0ns)
  const Tb = sentAt(seen, b.tok, b.t0ns)
  return Ta !== null && Tb !== null && Tb < Ta ? b : a
}

/** The holder of `iv` learned that its lock was lost: the signal aborted, or withLock rejected ERR_LOCK_LOST. */
function toldOfLoss(iv) {
  return Boolean(iv) && (Number.isFinite(iv.lost) || iv.result === 'ERR_LOCK_LOST')
}

function baseResult(def, topology, tier, expect) {
  return { id: def.id, name: def.name, topology, tier, expect, violations: [], notes: [] }
}

function fill(res, fin, extra = {}) {
  const { report } = fin
  res.ops = report.ops
  res.overlaps = fin.realOverlaps.length
  res.overlapsSeen = report.overlaps.length
  res.overlapsExcused = report.overlaps.length - fin.realOverlaps.length
  res.overlapsUnreported = fin.unreported.length
  res.overlapMsMax = report.overlapMsMax
  res.lostUpdates = report.lostUpdates
  res.losses = report.losses
  res.acquireErrors = report.acquireErrors.length
  res.errorCodes = [...new Set(report.acquireErrors.map((e) => e.code))]
  res.violations.push(...fin.violations)
  const inDoubt = Object.values(report.lostUpdatesPerKey).reduce((n, p) => n + p.inDoubt, 0)
  if (inDoubt) res.notes.push(`${inDoubt} write(s) in doubt: sent by a holder killed before the reply (counted neither lost nor applied)`)
  Object.assign(res, extra)
  return res
}

async function withCluster(n, env, fn) {
  const cluster = await Cluster.start(n)
  const sess = new Session(cluster, { env })
  try {
    return await fn({ cluster, sess })
  } finally {
    for (const w of sess.workers.values()) {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        try {
          process.kill(w.child.pid, 'SIGCONT')
          process.kill(w.child.pid, 'SIGKILL')
        } catch {}
      }
    }
    await cluster.stop()
  }
}

/** ms from each heal mark to the first acquire_ok after it (liveness). */
function recoveries(sess, heals) {
  const out = []
  for (const h of heals) {
    const t = BigInt(h.t)
    const next = sess.events.find((e) => e.ev === 'acquire_ok' && BigInt(e.t) > t)
    out.push(next ? Number(BigInt(next.t) - t) / 1e6 : Infinity)
  }
  return out
}

function checkLiveness(res, rec, budget) {
  res.recoveryMs = rec.map((r) => Math.round(r))
  for (const r of rec) if (!(r <= budget)) res.violations.push(`liveness: next acquire ${Math.round(r)} ms after the fault healed (budget ${budget} ms)`)
}

// ---------------------------------------------------------------------------

const scenarios = []
// `short`: the topologies the short tier (CI, under the runner's 120 s per file) runs.
const def = (id, name, topologies, run, short = topologies) => scenarios.push({ id, name, topologies, run, short })

def(1, 'baseline contention', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['b1', 'b2', 'b3']
  const ttls = [200, 500, 1000, 2000]
  return withCluster(n, env, async (ctx) => {
    const workers = 10
    for (let i = 0; i < workers; i++) {
      ctx.sess.spawn({ nodes: ctx.cluster.urls(), keys, ttl: ttls[i % ttls.length], holdMs: 2 + (i % 4), writes: 1 + (i % 2), duration: T(tier, 2000, 20000), api: i % 2 ? 'acquire' : 'withLock' })
    }
    await Promise.all([...ctx.sess.workers.values()].map((w) => within(w.exited, T(tier, 3000, 20000) + 15000)))
    const fin = await finish(ctx, keys, { maxTtl: 2000 })
    return fill(res, fin, { workers })
  })
})

def(2, 'holder paused (SIGSTOP) past its TTL', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['p']
  const ttl = 500
  return withCluster(n, env, async (ctx) => {
    const { sess } = ctx
    for (let i = 0; i < 5; i++) sess.spawn({ nodes: ctx.cluster.urls(), keys, ttl, holdMs: 80, writes: 3, duration: 60000, waitTimeout: 10000 })
    const rounds = T(tier, 2, 8)
    const pauses = []
    let after = 0n
    for (let r = 0; r < rounds; r++) {
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > after, 8000, { past: false })
      if (!ok) {
        res.violations.push('no acquisition to pause')
        break
      }
      const w = sess.workers.get(ok.w)
      const tStop = sess.signal(w, 'SIGSTOP')
      await sleep(ttl * 2.5) // the passing of time is the scenario
      const tCont = sess.signal(w, 'SIGCONT')
      pauses.push({ w: ok.w, tok: ok.tok, tStop, tCont })
      // It must learn of the loss right after it runs again.
      await sess.waitEvent((e) => (e.ev === 'lost' || e.ev === 'release_sent') && e.tok === ok.tok, 3000)
      after = BigInt(String(now()))
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    // The paused holder: no write after its deadline (checked generically), belief ended,
    // and the loss signalled once it ran again (at once: its deadline had passed).
    const lat = []
    for (const p of pauses) {
      const iv = fin.report.intervals.find((i) => i.tok === p.tok)
      const cont = ms(p.tCont, sess.base)
      if (!iv) continue
      if (Number.isFinite(iv.lost)) lat.push(Math.max(0, iv.lost - Math.max(cont, iv.deadline)))
      else if (!(iv.release < cont + SLACK)) res.violations.push(`paused holder ${p.w} was never told it lost the lock`)
      if (iv.writes.some((w) => w.t > cont && w.t > iv.deadline)) res.violations.push(`paused holder ${p.w} wrote after resuming past its deadline`)
      if (iv.result === true) res.violations.push(`paused holder ${p.w}'s release deleted a key (release() resolved true after its lock had expired)`)
    }
    for (const l of lat) if (l > 500) res.violations.push(`loss signalled ${Math.round(l)} ms after the paused holder resumed`)
    return fill(res, fin, { pauses: pauses.length, lossLatency: summary(lat) })
  })
}, ['single'])

def(3, 'event loop blocked past its TTL (watchdog until maxHold)', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const ttl = 300
  const maxHold = 1200
  const blockMs = 2500
  const keys = ['blk']
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    const rounds = T(tier, 1, 3)
    const lat = []
    const heldFor = []
    for (let r = 0; r < rounds; r++) {
      const v = sess.spawn({ mode: 'hold', nodes: cluster.urls(), keys, ttl, maxHold, blockMs, holdMs: 200, writeEvery: 20 })
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === v.id, 8000)
      if (!ok) {
        res.violations.push('blocked holder did not acquire')
        break
      }
      // Others wait for the key; they must only get it once maxHold is over.
      const waiter = sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 5, duration: 60000, waitTimeout: 10000, retryDelay: 10, retryJitter: 10 })
      const t0 = BigInt(ok.t0)
      // Watch the key from outside while the holder's event loop is blocked.
      let lastSeen = 0
      const until = performance.now() + blockMs + 200
      for (let i = 0; i < 400 && performance.now() < until; i++) {
        const vals = await Promise.all(cluster.inspectors.map((c) => c.get(PREFIX + keys[0]).catch(() => null)))
        const mine = vals.filter((x) => x === ok.tok).length
        if (mine >= Math.floor(n / 2) + 1) lastSeen = Number(now() - t0) / 1e6
        await sleep(20)
      }
      heldFor.push(Math.round(lastSeen))
      if (lastSeen < Math.min(maxHold, blockMs) - ttl / 3 - SLACK) res.violations.push(`watchdog kept the key only ${Math.round(lastSeen)} ms of maxHold ${maxHold} while the loop was blocked`)
      if (lastSeen > maxHold + SLACK) res.violations.push(`key still held ${Math.round(lastSeen)} ms after acquire, past maxHold ${maxHold}`)
      const lost = await sess.waitEvent((e) => e.ev === 'lost' && e.tok === ok.tok, 3000)
      const unblocked = Number(t0) / 1e6 + blockMs
      if (!lost) res.violations.push('blocked holder never got its signal aborted')
      else lat.push(Math.max(0, Number(BigInt(lost.t)) / 1e6 - unblocked))
      const other = await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === waiter.id, 3000)
      if (!other) res.violations.push('nobody acquired after maxHold')
      // maxHold counts from the holder's attempt, which began after its acquire() call (tA)
      // and before it resolved (t0): the earliest the key may be free is tA + maxHold.
      else if (Number(BigInt(other.t) - BigInt(ok.tA)) / 1e6 < maxHold - drift(ttl) - 5) res.violations.push(`another holder acquired ${Number(BigInt(other.t) - BigInt(ok.tA)) / 1e6} ms after the blocked one called acquire, before maxHold`)
      await sess.waitEvent((e) => e.ev === 'done' && e.w === v.id, 5000)
      waiter.child.stdin.write('stop\n')
      await within(waiter.exited, 5000)
    }
    for (const l of lat) if (l > 500) res.violations.push(`signal aborted ${Math.round(l)} ms after the loop unblocked`)
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    return fill(res, fin, { heldDuringBlockMs: heldFor, lossLatency: summary(lat), maxHold, blockMs, ttl })
  })
}, ['single'])

def(4, 'minority of nodes paused or killed', ['redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const keys = ['m1', 'm2']
  const ttl = 1000
  return withCluster(5, env, async (ctx) => {
    const { sess, cluster } = ctx
    for (let i = 0; i < 8; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl: i % 2 ? 1000 : 500, holdMs: 10, writes: 2, duration: 60000 })
    const rounds = T(tier, 1, 4)
    const heals = []
    await sleep(800)
    for (let r = 0; r < rounds; r++) {
      const a = (2 * r) % 5
      const b = (2 * r + 1) % 5
      cluster.pause(a)
      await cluster.kill(b)
      await sleep(1500)
      cluster.resume(a)
      // back empty, after the longest TTL (locks taken meanwhile never counted on it)
      await cluster.start(b)
      heals.push(sess.mark('heal', { what: 'minority back' }))
      await sleep(1000)
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    fill(res, fin)
    checkLiveness(res, recoveries(sess, heals), ttl + 40 + SLACK * 2)
    return res
  })
})

def(5, 'majority of nodes paused', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['q1', 'q2']
  const ttl = 800
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    // Holders hold longer than the pause: after it, they must not still believe.
    for (let i = 0; i < 6; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 300, writes: 8, duration: 60000, waitTimeout: 8000 })
    // Those wait the pause out (an outage shorter than their waitTimeout). This one, on a
    // key of its own (no holder to wait for), has a budget shorter than the pause yet
    // long enough for attempts to fail within it (commandTimeout 200): it must fail
    // with the outage's typed error.
    const alone = 'q3'
    const lone = sess.spawn({ nodes: cluster.urls(), keys: [alone], ttl, holdMs: 300, writes: 8, duration: 60000, waitTimeout: 700, commandTimeout: 200 })
    // It is at work (not still starting) before the first pause.
    if (!await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === lone.id, 10000)) res.violations.push('the short-budget worker never acquired')
    const rounds = T(tier, 1, 3)
    const heals = []
    const pausesAt = []
    const majority = n === 1 ? [0] : [0, 1, 2]
    for (let r = 0; r < rounds; r++) {
      // Pause while somebody holds a lock.
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > BigInt(String(now())) - 50_000_000n, 5000, { past: false })
      if (!ok) res.violations.push('nobody held a lock to pause under')
      const p = sess.mark('fault', { what: 'majority paused' })
      for (const i of majority) cluster.nodes[i].pause()
      pausesAt.push(ms(p.t, sess.base))
      await sleep(ttl * 2)
      for (const i of majority) cluster.nodes[i].resume()
      heals.push(sess.mark('heal', { what: 'majority resumed' }))
      await sleep(1500)
    }
    const fin = await finish(ctx, [...keys, alone], { maxTtl: ttl })
    fill(res, fin)
    // Every holder whose validity reached past the pause was told: lost signal, or a typed release failure.
    const lat = []
    let told = 0
    for (const iv of fin.report.intervals) {
      for (const p of pausesAt) {
        if (iv.start < p && iv.release > p + 50 && iv.deadline > p) {
          if (Number.isFinite(iv.lost)) {
            told++
            lat.push(iv.lost - iv.deadline)
          } else if (typeof iv.result === 'string' && /^ERR_LOCK_/.test(iv.result)) told++
          else res.violations.push(`holder ${iv.w} (${iv.k}) held across the pause and was never told (release: ${iv.result})`)
        }
      }
    }
    const codes = new Set(fin.report.acquireErrors.filter((e) => e.w === lone.id).map((e) => e.code))
    // Its budget may end inside the pause: then with the outage's code, or a timeout when
    // its own key, left on the reachable nodes by a release the pause cut off, was still
    // held. (Whether an attempt of it lands in the pause is up to timing; the typed
    // outcome of a budget shorter than an outage is tested exactly in __test__/outage.)
    const untyped = [...codes].filter((c) => !['ERR_LOCK_QUORUM', 'ERR_LOCK_CONNECTION', 'ERR_LOCK_TIMEOUT'].includes(c))
    if (untyped.length) res.violations.push(`the short-budget worker failed with ${untyped.join(', ')} during the pause`)
    res.notes = [...(res.notes || []), `short-budget worker's errors: ${[...codes].join(', ') || 'none'}`]
    for (const l of lat) if (l > SLACK * 2) res.violations.push(`loss signalled ${Math.round(l)} ms after the local deadline`)
    checkLiveness(res, recoveries(sess, heals), ttl + 40 + 1000 + SLACK * 2)
    res.holdersTold = told
    res.lossLatency = summary(lat)
    return res
  })
}, ['redlock'])

async function restartRun(d, topo, tier, env, delayed) {
  const res = baseResult(d, topo, tier, delayed ? 'safe' : 'unsafe')
  res.name = `${d.name} — ${delayed ? 'restarted after the longest TTL' : 'restarted empty at once'}`
  const n = topo === 'single' ? 1 : 5
  const keys = ['r']
  const ttl = 1500
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    const rounds = T(tier, 1, 3)
    for (let r = 0; r < rounds; r++) {
      // Redlock: A gets exactly a quorum (nodes 0,1,2); nodes 3 and 4 refuse it.
      if (n === 5) for (const i of [3, 4]) { cluster.proxies[i].refuse(true); cluster.proxies[i].cut() }
      const a = sess.spawn({ mode: 'hold', nodes: cluster.urls(), keys, ttl, holdMs: 2500, writeEvery: 15, connectTimeout: 200 })
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === a.id, 8000)
      if (n === 5) for (const i of [3, 4]) cluster.proxies[i].refuse(false)
      if (!ok) {
        res.violations.push(`holder A did not acquire: ${JSON.stringify(sess.events.filter((e) => e.w === a.id).slice(-2))}`)
        break
      }
      const victim = n === 5 ? 2 : 0
      await cluster.kill(victim)
      if (delayed) await sleep(ttl + 300) // the passing of time is the scenario
      await cluster.start(victim)
      const b = sess.spawn({ mode: 'hold', nodes: cluster.urls(), keys, ttl, holdMs: 600, writeEvery: 15, waitTimeout: 10000, retryDelay: 10, retryJitter: 10 })
      await sess.waitEvent((e) => e.ev === 'done' && e.w === b.id, 15000)
      await sess.waitEvent((e) => e.ev === 'done' && e.w === a.id, 15000)
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    fill(res, fin)
    return res
  })
}

def(6, 'node killed and restarted', ['single', 'redlock'], async (d, topo, tier, env) => [
  await restartRun(d, topo, tier, env, false),
  await restartRun(d, topo, tier, env, true),
], ['redlock'])

def(7, 'latency near the TTL through the proxy', ['single'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const keys = ['lat']
  const ttl = 400
  return withCluster(1, env, async (ctx) => {
    const { sess, cluster } = ctx
    const phase = T(tier, 2000, 8000)
    // Slow clients reach the node through the proxy (replies delayed); fast ones go direct.
    for (let i = 0; i < 3; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 60, writes: 2, duration: 60000, retryCount: 0, commandTimeout: 2000, connectTimeout: 3000, errorBackoff: 10 })
    // (the fast ones pause between locks, so the slow ones find the key free often)
    for (let i = 0; i < 2; i++) sess.spawn({ nodes: cluster.urls({ direct: true }), keys, ttl, holdMs: 3, writes: 1, duration: 60000, retryDelay: 5, retryJitter: 5, pauseMs: 120 })
    const slow = new Set([...sess.workers.keys()].slice(0, 3))
    const grants = []
    // Connections first (a handshake through the latency is not the point here).
    for (const id of slow) await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === id, 3000)
    // Over the TTL: every slow acquisition must be refused.
    cluster.proxies[0].setLatency(ttl + 30, 'down')
    const over = sess.mark('phase', { latency: ttl + 30 })
    await sleep(phase)
    // Just under ttl − drift: granted only with the little validity that is left.
    const near = ttl - drift(ttl) - 25
    cluster.proxies[0].setLatency(near, 'down')
    const under = sess.mark('phase', { latency: near })
    await sleep(phase)
    cluster.proxies[0].setLatency(0)
    const end = sess.mark('phase', { latency: 0 })
    await sleep(300)
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    fill(res, fin)
    const tOver = ms(over.t, sess.base) + 50
    const tUnder = ms(under.t, sess.base)
    const tEnd = ms(end.t, sess.base)
    // Phases by when the winning request passed the proxy (not when acquire() was called).
    const seen = ctx.cluster.tokensSeen()
    for (const iv of fin.report.intervals) {
      if (!slow.has(iv.w)) continue
      const T = sentAt(seen, iv.tok, iv.t0ns)
      if (T === null) continue
      const t = ms(T, sess.base)
      if (t > tOver && t < tUnder - 5) res.violations.push(`granted a lock through ${ttl + 30} ms latency (ttl ${ttl}): validity ${(iv.firstDeadline - iv.start).toFixed(1)} ms`)
      if (t > tUnder + 5 && t < tEnd) grants.push(iv.firstDeadline - iv.start)
    }
    const refused = fin.report.acquireErrors.filter((e) => slow.has(e.w) && e.code === 'ERR_LOCK_TIMEOUT').length
    res.slowGrantsNearTtl = grants.length
    res.slowValidityMs = summary(grants)
    res.refusedTooLate = refused
    if (refused === 0) res.violations.push('no acquisition was refused as too late while latency exceeded the TTL')
    return res
  })
})

def(8, 'SCRIPT FLUSH and node restarts mid-run', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['s1', 's2']
  const ttl = 800
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    for (let i = 0; i < 8; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 4, writes: 2, duration: 60000, api: i % 2 ? 'acquire' : 'withLock' })
    const heals = []
    const total = T(tier, 4000, 20000)
    const start = performance.now()
    let restarts = 0
    let flushes = 0
    let nextRestart = start + 1200
    for (let i = 0; i < 400 && performance.now() - start < total; i++) {
      await Promise.all(cluster.inspectors.map((c) => c.script('FLUSH').catch(() => {})))
      flushes++
      if (performance.now() >= nextRestart) {
        const node = restarts % n
        if (n === 1) {
          // Single node: an empty restart is only safe after the longest TTL.
          await cluster.kill(node)
          await sleep(ttl + 200)
          await cluster.start(node)
        } else {
          await cluster.restart(node) // one node at a time, spaced by more than a lock's life
        }
        heals.push(sess.mark('heal', { what: 'node back' }))
        restarts++
        nextRestart = performance.now() + 1800
      }
      await sleep(250)
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    fill(res, fin, { flushes, restarts })
    checkLiveness(res, recoveries(sess, heals), ttl + 40 + 1000 + SLACK * 2)
    return res
  })
}, ['redlock'])

def(9, 'lock key deleted under the holder', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['d1', 'd2']
  const ttl = 600
  const renew = ttl / 3
  const window = renew + SLACK
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    for (let i = 0; i < 6; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 200, writes: 4, duration: 60000, retryDelay: 10, retryJitter: 10 })
    const rounds = T(tier, 3, 15)
    const dels = []
    for (let r = 0; r < rounds; r++) {
      const since = now()
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > since, 5000, { past: false })
      if (!ok) break
      await sleep(30)
      // Delete it on a majority (all of one node): the holder's token, nobody else's.
      const targets = n === 1 ? [0] : [0, 1, 2]
      let deleted = 0
      for (const i of targets) {
        const c = cluster.inspectors[i]
        deleted += await c.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, PREFIX + ok.k, ok.tok)
      }
      // A lock that won a majority without one of the targets (another node
      // instead) loses its majority to fewer deletions: a victim too, though
      // not one that must have lost (it may keep a majority).
      if (deleted > 0) dels.push({ tok: ok.tok, w: ok.w, t: sess.mark('fault', { what: 'DEL', tok: ok.tok }).t, whole: deleted >= targets.length })
      await sleep(600)
    }
    const victims = new Map(dels.map((x) => [x.tok, ms(x.t, sess.base)]))
    const surely = new Set(dels.filter((x) => x.whole).map((x) => x.tok))
    // An overlap is the deletion's doing, not the lock's, while the victim is still
    // within one renew interval of it; past that it is a violation.
    const excuse = (o, report) => {
      for (const tok of [o.a, o.b]) {
        if (!victims.has(tok)) continue
        const iv = report.intervals.find((i) => i.tok === tok)
        if (iv && iv.end <= victims.get(tok) + window) return true
      }
      return false
    }
    // Likewise a lost update: a duplicated counter value one of whose writers was a
    // victim writing inside its window (it could not know yet).
    const excuseLost = (report) => {
      const byVal = new Map()
      for (const iv of report.intervals) for (const w of iv.writes) {
        const key = `${iv.k}:${w.v}`
        if (!byVal.has(key)) byVal.set(key, [])
        byVal.get(key).push({ tok: iv.tok, t: w.t })
      }
      let n = 0
      for (const ws of byVal.values()) {
        if (ws.length < 2) continue
        if (ws.some((w) => victims.has(w.tok) && w.t >= victims.get(w.tok) && w.t <= victims.get(w.tok) + window)) n += ws.length - 1
      }
      return n
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl, excuse, excuseLost })
    fill(res, fin, { excusedBy: 'an external DEL' })
    const lat = []
    for (const [tok, tDel] of victims) {
      if (!surely.has(tok)) continue
      const iv = fin.report.intervals.find((i) => i.tok === tok)
      if (!iv) continue
      if (Number.isFinite(iv.lost)) lat.push(iv.lost - tDel)
      if (iv.end > tDel + window) res.violations.push(`holder ${iv.w} still believed ${Math.round(iv.end - tDel)} ms after its key was deleted (limit: renew interval ${renew} + ${SLACK} ms)`)
    }
    res.deletions = surely.size
    res.lossLatency = summary(lat)
    if (surely.size === 0) res.violations.push('no key was deleted under a holder')
    return res
  })
}, ['single'])

def(10, 'connection churn (CLIENT KILL, proxy cuts)', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['c1', 'c2']
  const ttl = 600
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    for (let i = 0; i < 8; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 20, writes: 2, duration: 60000 })
    const total = T(tier, 3000, 20000)
    const start = performance.now()
    let kills = 0
    for (let i = 0; i < 300 && performance.now() - start < total; i++) {
      if (i % 2 === 0) await Promise.all(cluster.inspectors.map((c) => c.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes').catch(() => {})))
      else cluster.proxies.forEach((p) => p.cut())
      kills++
      await sleep(200 + Math.floor(Math.random() * 150))
    }
    const heal = sess.mark('heal', { what: 'churn stopped' })
    await sleep(500)
    const fin = await finish(ctx, keys, { maxTtl: ttl, allowLosses: false })
    fill(res, fin, { kills })
    checkLiveness(res, recoveries(sess, [heal]), ttl + 40 + SLACK * 2)
    return res
  })
}, ['redlock'])

def(11, 'holder SIGTERM and SIGKILL', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['t']
  const ttl = 1000
  const budget = { SIGTERM: 40 + SLACK * 2, SIGKILL: ttl + 40 + SLACK * 2 }
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    const next = {}
    const rounds = T(tier, 1, 3)
    for (let r = 0; r < rounds; r++) {
      for (const sig of ['SIGTERM', 'SIGKILL']) {
        const h = sess.spawn({ mode: 'hold', nodes: cluster.urls(), keys, ttl, holdMs: 30000, writeEvery: 20 })
        const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === h.id, 8000)
        if (!ok) {
          res.violations.push(`holder did not acquire (${sig})`)
          continue
        }
        const waiter = sess.spawn({ mode: 'hold', nodes: cluster.urls(), keys, ttl, holdMs: 50, writeEvery: 10, waitTimeout: 10000, retryDelay: 20, retryJitter: 20 })
        await sess.waitEvent((e) => e.ev === 'attempt' && e.w === waiter.id, 8000)
        await sleep(300) // the waiter is now retrying against the held key
        const t = sess.signal(h, sig)
        const got = await sess.waitEvent((e) => e.ev === 'acquire_ok' && e.w === waiter.id, 8000)
        const gap = got ? Number(BigInt(got.t) - BigInt(t)) / 1e6 : Infinity
        ;(next[sig] = next[sig] || []).push(Math.round(gap))
        if (!(gap <= budget[sig])) res.violations.push(`next acquire ${Math.round(gap)} ms after ${sig} (budget ${budget[sig]} ms)`)
        await within(h.exited, 3000)
        await sess.waitEvent((e) => e.ev === 'done' && e.w === waiter.id, 5000)
      }
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    return fill(res, fin, { nextAcquireMs: next })
  })
}, ['single'])

/**
 * Every lock key of a node wiped at once from outside (`wipe(client, at)`), on
 * one node or a majority, while holders work; then `restore(client)`, if
 * given. `wipe` calls `at()` right before the command that wipes and returns
 * once the keys are gone: a lock whose winning request passed the proxy
 * before the wipe returned may have been wiped (its reply can reach its
 * worker, and be logged, well after). Each holder whose key was wiped must
 * learn of the loss within `window` ms; an overlap with the next holder inside
 * that window is excused only if the wiped holder was told.
 */
const WIPE_TTL = 3000

async function wipeRun(d, topo, tier, env, { what, label, wipe, restore, window: win, check }) {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['w1', 'w2']
  // Critical sections far shorter than the renew interval: most wiped holders
  // finish before a renewal could notice, so only their release can tell them.
  const ttl = WIPE_TTL
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    for (let i = 0; i < 6; i++) sess.spawn({ nodes: cluster.urls(), keys, ttl, holdMs: 60, writes: 2, duration: 60000, retryDelay: 10, retryJitter: 10, api: i % 2 ? 'acquire' : 'withLock' })
    const rounds = T(tier, 3, 12)
    const faults = []
    for (let r = 0; r < rounds; r++) {
      const since = now()
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > since, 5000, { past: false })
      if (!ok) break
      await sleep(20)
      const targets = n === 1 ? [0] : [0, 1, 2]
      let start = null
      const at = () => {
        if (start === null) start = sess.mark('fault', { what })
      }
      const done = await Promise.all(targets.map((i) => wipe(cluster.inspectors[i], at).then(() => true, () => false)))
      if (done.every(Boolean) && start) faults.push({ start: BigInt(start.t), end: now() })
      if (restore) await Promise.all(targets.map((i) => restore(cluster.inspectors[i])))
      await sleep(600)
    }
    const seen = cluster.tokensSeen()
    // A victim: a lock whose winning request passed the proxies before the
    // wipe was over, and which was still believed held when it began.
    const victimsOf = (report) => {
      const v = new Map()
      for (const iv of report.intervals) {
        const T = sentAt(seen, iv.tok, iv.t0ns)
        if (T === null) continue
        for (const f of faults) {
          const tf = ms(f.start, sess.base)
          if (T <= f.end && iv.end > tf) v.set(iv.tok, tf)
        }
      }
      return v
    }
    let victims = null
    const excuse = (o, report) => {
      victims ??= victimsOf(report)
      for (const tok of [o.a, o.b]) {
        if (!victims.has(tok)) continue
        const iv = report.intervals.find((i) => i.tok === tok)
        if (iv && iv.end <= victims.get(tok) + win) return true
      }
      return false
    }
    const excuseLost = (report) => {
      victims ??= victimsOf(report)
      const byVal = new Map()
      for (const iv of report.intervals) for (const w of iv.writes) {
        const key = `${iv.k}:${w.v}`
        if (!byVal.has(key)) byVal.set(key, [])
        byVal.get(key).push({ tok: iv.tok, t: w.t })
      }
      let lost = 0
      for (const ws of byVal.values()) {
        if (ws.length < 2) continue
        if (ws.some((w) => victims.has(w.tok) && w.t >= victims.get(w.tok) && w.t <= victims.get(w.tok) + win)) lost += ws.length - 1
      }
      return lost
    }
    const fin = await finish(ctx, keys, { maxTtl: ttl, excuse, excuseLost })
    fill(res, fin, { excusedBy: label })
    victims ??= victimsOf(fin.report)
    const lat = []
    for (const [tok, tf] of victims) {
      const iv = fin.report.intervals.find((i) => i.tok === tok)
      if (!iv) continue
      if (Number.isFinite(iv.lost)) lat.push(iv.lost - tf)
      if (iv.end > tf + win) res.violations.push(`holder ${iv.w} still believed ${Math.round(iv.end - tf)} ms after the ${what} (limit ${win} ms)`)
    }
    res.faults = faults.length
    res.victims = victims.size
    res.lossLatency = summary(lat)
    if (faults.length === 0) res.violations.push(`no ${what} was carried out`)
    if (check) await check(res, cluster, n === 1 ? [0] : [0, 1, 2])
    return res
  })
}

def(12, 'FLUSHALL under the holders', ['single', 'redlock'], (d, topo, tier, env) => wipeRun(d, topo, tier, env, {
  what: 'FLUSHALL',
  label: 'a FLUSHALL',
  wipe: (c, at) => {
    at()
    return c.flushall()
  },
  window: WIPE_TTL / 3 + SLACK,
}), ['single'])

def(13, 'allkeys-lru eviction under maxmemory', ['single', 'redlock'], (d, topo, tier, env) => wipeRun(d, topo, tier, env, {
  what: 'eviction',
  label: 'an allkeys-lru eviction',
  // maxmemory far below what the node uses, so every key (the lock keys
  // included) is evicted, at the latest by the next write, which is refused
  // as OOM; until restore lifts the limit, every lock's SET is refused too.
  wipe: async (c, at) => {
    await c.config('SET', 'maxmemory-policy', 'allkeys-lru')
    at()
    try {
      await c.config('SET', 'maxmemory', '1')
    } finally {
      await c.set('fault:evict', 'x').catch(() => {})
    }
  },
  restore: (c) => c.config('SET', 'maxmemory', '0'),
  // A renewal that meets the OOM instant fails as a fault; the next one finds the key gone.
  window: 2 * (WIPE_TTL / 3) + SLACK,
  check: async (res, cluster, targets) => {
    let evicted = 0
    for (const i of targets) {
      const info = await cluster.inspectors[i].info('stats')
      evicted += Number((/evicted_keys:(\d+)/.exec(info) || [])[1] || 0)
    }
    res.evictedKeys = evicted
    if (evicted === 0) res.violations.push('no key was evicted (maxmemory with allkeys-lru had no effect)')
  },
}), ['single'])

// On five nodes (Redlock) a semaphore's permits are numbered slots, each a
// mutex a majority grants; the run adds the Redlock faults of scenario 4 (a
// minority of nodes paused, or killed and back empty after the longest TTL).
def(14, 'semaphore: never more than limit permits held (contention, holders paused past their TTL)', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['sem']
  const ttl = 400
  const limit = 3
  return withCluster(n, env, async (ctx) => {
    const { sess, cluster } = ctx
    const workers = 8
    for (let i = 0; i < workers; i++) {
      sess.spawn({ api: 'semaphore', limit, maxPermits: 2, nodes: cluster.urls(), keys, ttl, holdMs: 5 + (i % 4) * 10, duration: T(tier, 3000, 20000), waitTimeout: 10000 })
    }
    // A holder paused past its lease: its permits are reclaimed; it must be told once it runs again.
    const rounds = T(tier, 1, 4)
    let paused = 0
    let nodeFaults = 0
    let after = 0n
    for (let r = 0; r < rounds; r++) {
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > after, 8000, { past: false })
      if (!ok) break
      const w = sess.workers.get(ok.w)
      sess.signal(w, 'SIGSTOP')
      if (n === 5) {
        // Meanwhile a minority of nodes: one paused, one killed.
        cluster.pause((2 * r) % 5)
        await cluster.kill((2 * r + 1) % 5)
      }
      await sleep(ttl * 2.5)
      sess.signal(w, 'SIGCONT')
      if (n === 5) {
        cluster.resume((2 * r) % 5)
        // Back empty, after the longest TTL (holders granted meanwhile were never counted on it).
        await cluster.start((2 * r + 1) % 5)
        nodeFaults++
      }
      paused++
      await sess.waitEvent((e) => (e.ev === 'lost' || e.ev === 'release_sent') && e.tok === ok.tok, 3000)
      after = BigInt(String(now()))
    }
    await Promise.all([...sess.workers.values()].map((w) => within(w.exited, T(tier, 3000, 20000) + 15000)))
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    const ivs = fin.report.intervals.filter((iv) => iv.limit)
    if (ivs.length < 10) res.violations.push(`only ${ivs.length} holders: too little contention to check`)
    // Permits side by side: at some instant more than one holder (else the limit was never under test).
    const most = mostHeld(ivs)
    if (most < limit) res.violations.push(`at most ${most} permits were ever held at once: the limit of ${limit} was never reached`)
    return fill(res, fin, { workers, limit, paused, nodeFaults, holders: ivs.length, mostHeld: most })
  })
})

/** The most permits the belief intervals ever add up to at one instant. */
function mostHeld(ivs) {
  const edges = []
  for (const iv of ivs) if (iv.end > iv.start) edges.push({ t: iv.start, d: iv.permits }, { t: iv.end, d: -iv.permits })
  edges.sort((a, b) => a.t - b.t || a.d - b.d)
  let held = 0
  let most = 0
  for (const e of edges) {
    held += e.d
    most = Math.max(most, held)
  }
  return most
}

def(15, 'read-write lock: never a writer beside anyone (contention, holders paused past their TTL)', ['single', 'redlock'], async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const n = topo === 'single' ? 1 : 5
  const keys = ['rw']
  const ttl = 400
  return withCluster(n, env, async (ctx) => {
    const { sess } = ctx
    const workers = 8
    for (let i = 0; i < workers; i++) {
      sess.spawn({ api: 'rwlock', writeShare: 0.3, nodes: ctx.cluster.urls(), keys, ttl, holdMs: 5 + (i % 4) * 10, duration: T(tier, 3000, 20000), waitTimeout: 10000 })
    }
    const rounds = T(tier, 1, 4)
    let paused = 0
    let after = 0n
    for (let r = 0; r < rounds; r++) {
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > after, 8000, { past: false })
      if (!ok) break
      const w = sess.workers.get(ok.w)
      sess.signal(w, 'SIGSTOP')
      await sleep(ttl * 2.5)
      sess.signal(w, 'SIGCONT')
      paused++
      await sess.waitEvent((e) => (e.ev === 'lost' || e.ev === 'release_sent') && e.tok === ok.tok, 3000)
      after = BigInt(String(now()))
    }
    await Promise.all([...sess.workers.values()].map((w) => within(w.exited, T(tier, 3000, 20000) + 15000)))
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    const ivs = fin.report.intervals.filter((iv) => iv.limit)
    const writers = ivs.filter((iv) => iv.permits === iv.limit).length
    if (writers < 3 || ivs.length - writers < 3) res.violations.push(`only ${writers} writer(s) and ${ivs.length - writers} reader(s): too little contention to check`)
    return fill(res, fin, { workers, paused, writers, readers: ivs.length - writers })
  })
}, ['single'])

// Fair acquisitions (one node): the same exact checks while waiters are served
// in arrival order through a line kept in Redis and a release hands a lock
// straight to the next waiter; holders, and waiters handed a lock while
// stopped, are paused past their TTL.
const fairRun = (api) => async (d, topo, tier, env) => {
  const res = baseResult(d, topo, tier, 'safe')
  const keys = [`fair-${api}`]
  const ttl = 400
  return withCluster(1, env, async (ctx) => {
    const { sess } = ctx
    const workers = 8
    for (let i = 0; i < workers; i++) {
      const base = { fair: true, nodes: ctx.cluster.urls(), keys, ttl, holdMs: 5 + (i % 4) * 10, duration: T(tier, 3000, 20000), waitTimeout: 10000 }
      if (api === 'lock') sess.spawn({ ...base, holdMs: 2 + (i % 4), writes: 2, api: i % 2 ? 'acquire' : 'withLock' })
      else if (api === 'semaphore') sess.spawn({ ...base, api, limit: 3, maxPermits: 2 })
      else sess.spawn({ ...base, api, writeShare: 0.3 })
    }
    const rounds = T(tier, 2, 6)
    let paused = 0
    let after = 0n
    for (let r = 0; r < rounds; r++) {
      const ok = await sess.waitEvent((e) => e.ev === 'acquire_ok' && BigInt(e.t) > after, 8000, { past: false })
      if (!ok) break
      // Odd rounds stop a waiter instead: it may be handed the lock while stopped.
      const w = r % 2 ? [...sess.workers.values()].find((x) => x.id !== ok.w) : sess.workers.get(ok.w)
      sess.signal(w, 'SIGSTOP')
      await sleep(ttl * 2.5)
      sess.signal(w, 'SIGCONT')
      paused++
      if (r % 2 === 0) await sess.waitEvent((e) => (e.ev === 'lost' || e.ev === 'release_sent') && e.tok === ok.tok, 3000)
      after = BigInt(String(now()))
    }
    await Promise.all([...sess.workers.values()].map((w) => within(w.exited, T(tier, 3000, 20000) + 15000)))
    const fin = await finish(ctx, keys, { maxTtl: ttl })
    const held = fin.report.intervals.length
    if (held < 20) res.violations.push(`only ${held} holders: too little contention to check`)
    return fill(res, fin, { workers, paused, holders: held })
  })
}
def(20, 'fair lock: one holder at a time (hand-offs; holders and waiters paused past their TTL)', ['single'], fairRun('lock'), ['single'])
def(21, 'fair semaphore: never more than limit permits held (holders and waiters paused)', ['single'], fairRun('semaphore'), ['single'])
def(22, 'fair read-write lock: never a writer beside anyone (holders and waiters paused)', ['single'], fairRun('rwlock'), ['single'])

/** Runs scenario `id` on each of its topologies (or just `topology`). Returns result rows. */
async function runScenario(id, { tier = 'short', env = {}, topology } = {}) {
  const d = scenarios.find((s) => s.id === id)
  if (!d) throw new Error(`no scenario ${id}`)
  const rows = []
  for (const topo of tier === 'short' && !topology ? d.short : d.topologies) {
    if (topology && topo !== topology) continue
    const t0 = performance.now()
    const out = await d.run(d, topo, tier, env)
    for (const row of [].concat(out)) {
      row.seconds = Math.round((performance.now() - t0) / 100) / 10
      row.pass = row.expect === 'safe' ? row.violations.length === 0 : row.violations.some((v) => /^overlap|^lost updates|^validity|still believed|never told/.test(v))
      rows.push(row)
    }
  }
  return rows
}

module.exports = { scenarios, runScenario, PREFIX, SLACK }
