'use strict'

// The exact checker. Every timestamp is process.hrtime.bigint() (CLOCK_MONOTONIC,
// one clock for every process on the machine), so intervals of different
// processes compare exactly. Times are turned into ms relative to `base`.
//
// (1) belief intervals [acquire_ok, min(release_sent, lost, latest observed local
//     deadline, death)] of different holders of one key never overlap;
//     For a semaphore (holders logged with `limit` and `permits`): the permits
//     held by the belief intervals of one key never add up to more than limit;
// (2) the read-modify-write counter of each key lost no update;
// (5) validity bound: no lock is granted a local deadline later than
//     T + ttl − (ttl × driftFactor + 2 ms), where T is when its token first passed
//     through a proxy towards Redis (the acquisition started before that, and the
//     key cannot expire on Redis before T + ttl). This is the spec's validity
//     rule, so never a lock with zero or negative real validity, and the drift
//     allowance is kept. Only locks taken through the proxies are bounded.
// Liveness (3) and orphans (4) need the harness's fault times and the nodes:
// scenarios.js measures them with the helpers below.

const ms = (t, base) => Number(BigInt(t) - base) / 1e6

function percentile(values, p) {
  if (!values.length) return null
  const s = [...values].sort((a, b) => a - b)
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))
  return Math.round(s[i] * 100) / 100
}

/** Belief intervals per token, from the workers' events (and kill times). */
function intervals(events, base, deaths = new Map()) {
  const byTok = new Map()
  for (const e of events) {
    if (!e.tok) continue
    let iv = byTok.get(e.tok)
    if (e.ev === 'acquire_ok') {
      iv = { tok: e.tok, k: e.k, w: e.w, t0ns: e.t0 || e.t, start: ms(e.t0 || e.t, base), deadline: ms(e.deadline, base), tA: ms(e.tA, base), ttl: e.ttl, release: Infinity, lost: Infinity, writes: [] }
      // A semaphore's holder: up to `limit` permits of the key may be held side by side.
      if (e.limit) Object.assign(iv, { limit: e.limit, permits: e.permits || 1 })
      byTok.set(e.tok, iv)
      continue
    }
    if (!iv) continue
    if (e.ev === 'observe') iv.deadline = Math.max(iv.deadline, ms(e.deadline, base))
    else if (e.ev === 'release_sent') iv.release = Math.min(iv.release, ms(e.t, base))
    else if (e.ev === 'lost') iv.lost = Math.min(iv.lost, ms(e.t, base))
    else if (e.ev === 'write') iv.writes.push({ t: ms(e.t, base), v: e.v, applied: false })
    else if (e.ev === 'wrote') {
      const w = iv.writes.findLast((x) => x.v === e.v)
      if (w) w.applied = true
    }
    else if (e.ev === 'release_result') iv.result = e.r ?? e.err
  }
  const list = [...byTok.values()]
  for (const iv of list) {
    const death = deaths.has(iv.w) ? ms(deaths.get(iv.w), base) : Infinity
    iv.death = death
    iv.end = Math.min(iv.release, iv.lost, iv.deadline, death)
  }
  return list
}

/** When the request that won lock `tok` passed the proxies: per proxy the last
 * sighting no later than t0 (the worker had the lock), the earliest of those. */
function sentAt(seen, tok, t0ns) {
  if (!seen || !seen.has(tok)) return null
  const t0 = BigInt(t0ns)
  let T = null
  for (const ts of seen.get(tok)) {
    let last = null
    for (const t of ts) if (t <= t0) last = t
    if (last !== null && (T === null || last < T)) T = last
  }
  return T
}

/** Every pair of overlapping belief intervals on one key (different tokens). */
function overlaps(ivs) {
  const byKey = new Map()
  for (const iv of ivs) {
    if (iv.limit) continue // semaphores: see excess()
    if (!byKey.has(iv.k)) byKey.set(iv.k, [])
    byKey.get(iv.k).push(iv)
  }
  const found = []
  for (const [, list] of byKey) {
    list.sort((a, b) => a.start - b.start)
    const active = []
    for (const iv of list) {
      for (let i = active.length - 1; i >= 0; i--) if (active[i].end <= iv.start) active.splice(i, 1)
      for (const a of active) {
        const by = Math.min(a.end, iv.end) - iv.start
        if (by > 0) found.push({ k: iv.k, a: a.tok, b: iv.tok, wa: a.w, wb: iv.w, at: iv.start, ms: Math.round(by * 1000) / 1000 })
      }
      active.push(iv)
    }
  }
  return found
}

/**
 * (1') for semaphores: the instants where the belief intervals of one key's
 * holders add up to more permits than its limit. Ends sort before starts at
 * the same instant (a holder's end and the next one's start may touch).
 */
function excess(ivs) {
  const byKey = new Map()
  for (const iv of ivs) {
    if (!iv.limit) continue
    if (!byKey.has(iv.k)) byKey.set(iv.k, [])
    const edges = byKey.get(iv.k)
    if (iv.end > iv.start) edges.push({ t: iv.start, d: iv.permits, iv }, { t: iv.end, d: -iv.permits, iv })
  }
  const found = []
  for (const [k, edges] of byKey) {
    edges.sort((a, b) => a.t - b.t || a.d - b.d)
    let held = 0
    for (const e of edges) {
      held += e.d
      if (e.d > 0 && held > e.iv.limit) found.push({ k, at: Math.round(e.t * 1000) / 1000, held, limit: e.iv.limit, tok: e.iv.tok, w: e.iv.w })
    }
  }
  return found
}

/** Locks granted more validity than ttl − elapsed − drift allows (elapsed ≥ 0 from the attempt start). */
function validityViolations(ivs, seen, base, driftFactor = 0.01, toleranceMs = 0.05) {
  const bad = []
  for (const iv of ivs) {
    if (!iv.ttl || !seen || !seen.has(iv.tok)) continue
    const firstDeadline = iv.firstDeadline ?? iv.deadline
    // The winning attempt was sent no later than the last time the token passed
    // each proxy before the worker had the lock (a single node reuses its token
    // across retries; Redlock uses a fresh one per attempt).
    const T = sentAt(seen, iv.tok, iv.t0ns)
    if (T === null) continue
    const bound = ms(T, base) + iv.ttl - (iv.ttl * driftFactor + 2)
    if (firstDeadline > bound + toleranceMs) bad.push({ tok: iv.tok, k: iv.k, w: iv.w, ttl: iv.ttl, overBy: Math.round((firstDeadline - bound) * 1000) / 1000 })
  }
  return bad
}

/**
 * Lower bounds on lost updates per key: logged increments the counter does not
 * show, and duplicate values. A write whose writer was killed (SIGKILL) before it
 * logged the reply is in doubt: the kill may have come between the log line and
 * the command leaving the process, so it is counted neither as lost nor as
 * applied (the counter may show it or not).
 */
function lostUpdates(ivs, finals) {
  const per = {}
  let total = 0
  const byKey = new Map()
  for (const iv of ivs) for (const w of iv.writes) {
    if (!byKey.has(iv.k)) byKey.set(iv.k, { sure: [], doubt: 0 })
    const k = byKey.get(iv.k)
    if (!w.applied && Number.isFinite(iv.death)) k.doubt++
    else k.sure.push(w.v)
  }
  for (const [k, { sure, doubt }] of byKey) {
    const seen = new Set()
    let dups = 0
    for (const v of sure) {
      if (seen.has(v)) dups++
      seen.add(v)
    }
    const final = Number(finals[k] || 0)
    const missing = Math.max(0, sure.length - final)
    const extra = Math.max(0, final - sure.length - doubt) // applied more often than logged: double execution
    per[k] = { writes: sure.length + doubt, inDoubt: doubt, final, lost: Math.max(dups, missing), extra }
    total += Math.max(dups, missing)
  }
  return { total, per }
}

/** Parses worker lines and checks (1), (2), (5). */
function check(events, { base, finals = {}, deaths = new Map(), driftFactor = 0.01, seen = null } = {}) {
  // The first deadline of each lock, before renewals move it.
  const ivs = intervals(events, base, deaths)
  const first = new Map()
  for (const e of events) if (e.ev === 'acquire_ok') first.set(e.tok, ms(e.dlo || e.deadline, base))
  for (const iv of ivs) iv.firstDeadline = first.get(iv.tok)
  const ov = overlaps(ivs)
  const ex = excess(ivs)
  const vv = validityViolations(ivs, seen, base, driftFactor)
  const lu = lostUpdates(ivs, finals)
  const writesAfterEnd = []
  for (const iv of ivs) for (const w of iv.writes) if (w.t > iv.end) writesAfterEnd.push({ tok: iv.tok, k: iv.k, late: w.t - iv.end })
  const fatal = events.filter((e) => e.ev === 'fatal' || e.ev === 'warning')
  const losses = events.filter((e) => e.ev === 'lost')
  return {
    ops: ivs.length,
    intervals: ivs,
    overlaps: ov,
    overlapMsMax: ov.reduce((m, o) => Math.max(m, o.ms), 0),
    excess: ex,
    validity: vv,
    bounded: seen ? ivs.filter((iv) => seen.has(iv.tok)).length : 0,
    lostUpdates: lu.total,
    lostUpdatesPerKey: lu.per,
    doubleWrites: Object.values(lu.per).reduce((s, p) => s + p.extra, 0),
    writesAfterEnd,
    fatal,
    losses: losses.length,
    acquireErrors: events.filter((e) => e.ev === 'acquire_err'),
  }
}

module.exports = { check, sentAt, intervals, overlaps, excess, validityViolations, lostUpdates, percentile, ms }
