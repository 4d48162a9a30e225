'use strict'

// Markdown tables and target checks from the aggregated report (medians across rounds).

const f = (x, d = 0) => (typeof x === 'number' && Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : '–')
const ratio = (x) => (typeof x === 'number' && Number.isFinite(x) ? `${x.toFixed(2)}×` : '–')

function rows(section) {
  return Object.entries(section || {}).map(([name, r]) => ({ name, ...r, m: r.median }))
}
const peers = (section) => rows(section).filter((r) => r.kind === 'peer')
const floorRow = (section, name = 'floor') => (section && section[name] ? { name, ...section[name], m: section[name].median } : null)
const lockdogRow = (section) => (section && section.lockdog ? { name: 'lockdog', ...section.lockdog, m: section.lockdog.median } : null)

function bestBy(list, key, higherIsBetter) {
  let best = null
  for (const r of list) {
    const v = r.m[key]
    if (typeof v !== 'number') continue
    if (!best || (higherIsBetter ? v > best.m[key] : v < best.m[key])) best = r
  }
  return best
}

function table(head, body) {
  return [`| ${head.join(' | ')} |`, `|${head.map((h, i) => (i === 0 ? ':--' : '--:')).join('|')}|`, ...body.map((r) => `| ${r.join(' | ')} |`)].join('\n')
}

const order = { lockdog: 0, peer: 1, floor: 2 }
const sortRows = (list, key, higher) =>
  list.sort((a, b) => order[a.kind] - order[b.kind] || (higher ? b.m[key] - a.m[key] : a.m[key] - b.m[key]))

/** The per-pair cost columns of scenarios 1 and 2 (medians across rounds). */
const COST_HEAD = ['client CPU µs/pair', 'JS thread µs/pair', 'Redis CPU µs/pair', 'Redis command µs/pair']
const costCells = (r) => [f(r.m.cpuUsPerPair, 1), f(r.m.jsUsPerPair, 1), f(r.m.redisUsPerPair, 1), f(r.m.redisCommandUsPerPair, 2)]

function s1(report) {
  const sec = report.results.s1
  if (!sec) return null
  const fl = floorRow(sec)
  const best = bestBy(peers(sec), 'meanUs', false)
  const list = sortRows(rows(sec), 'meanUs', false)
  const body = list.map((r) => [
    r.label,
    f(r.m.opsPerSec),
    f(r.m.meanUs),
    f(r.m.p50Us),
    f(r.m.p99Us),
    fl && r.name !== 'redis-benchmark' ? ratio(r.m.meanUs / fl.m.meanUs) : '–',
    best && r.name !== 'redis-benchmark' ? ratio(r.m.meanUs / best.m.meanUs) : '–',
    ...(r.name === 'redis-benchmark' ? COST_HEAD.map(() => '–') : costCells(r)),
  ])
  const rb = sec['redis-benchmark']
  return [
    '### 1. Sequential acquire + release, one key, one node',
    table(['contender', 'pairs/s', 'mean µs/pair', 'p50 µs', 'p99 µs', '× raw floor', '× best peer', ...COST_HEAD], body),
    'Per pair, over the measured window: client CPU is every thread of the contender\'s process (`process.cpuUsage`), the JS thread its main thread, Redis CPU the server process\'s (`INFO cpu` used_cpu_user + used_cpu_sys: its commands and its network I/O), Redis command time the commands\' own (`INFO commandstats` usec; a script\'s time holds the commands it runs, which are not counted again). Read them as proportions on a loaded machine.',
    rb ? `redis-benchmark SET on one connection: ${f(rb.median.opsPerSec)} SET/s (p50 ${f(rb.median.p50Us)} µs), so two wire round trips take ≈ ${f(2 * rb.median.meanUs)} µs; its row above is for one SET, not a pair.` : '',
  ].join('\n\n')
}

function s2(report) {
  const sec = report.results.s2
  if (!sec) return null
  const fl = floorRow(sec)
  const best = bestBy(peers(sec), 'opsPerSec', true)
  const list = sortRows(rows(sec), 'opsPerSec', true)
  const body = list.map((r) => [r.label, f(r.m.opsPerSec), f(r.m.p50Us), f(r.m.p99Us), fl ? ratio(r.m.opsPerSec / fl.m.opsPerSec) : '–', best ? ratio(r.m.opsPerSec / best.m.opsPerSec) : '–', ...costCells(r)])
  return [
    `### 2. ${report.settings.s2.workers} concurrent workers on distinct keys`,
    table(['contender', 'pairs/s', 'p50 µs', 'p99 µs', '× raw floor (throughput)', '× best peer (throughput)', ...COST_HEAD], body),
  ].join('\n\n')
}

function evalsPer(r) {
  const c = r.m.commands || {}
  return ((c.evalsha || 0) + (c.eval || 0)) / r.m.criticalSections
}

function s3(report, sk = 's3') {
  const sec = report.results[sk]
  if (!sec) return null
  const best = bestBy(peers(sec), 'csPerSec', true)
  const list = sortRows(rows(sec), 'csPerSec', true)
  const body = list.map((r) => [
    r.label,
    f(r.m.csPerSec),
    f(r.m.handoffP50Us),
    f(r.m.handoffP99Us),
    f(r.m.jain, 2),
    `${f(r.m.maxCompletions)}/${f(r.m.minCompletions)}`,
    f(r.m.worstOverMeanWait, 1),
    f(r.m.cmdsPerLock, 1),
    f(evalsPer(r), 1),
    f(r.m.redisCpuPct, 0),
    best ? ratio(r.m.csPerSec / best.m.csPerSec) : '–',
  ])
  const s = report.settings
  const p = s[sk]
  const title = sk === 's6'
    ? `### 6. Contention at each library's defaults: ${p.workers} workers, one key, ${p.holdMs} ms critical section`
    : `### 3. Contention: ${p.workers} workers, one key, ${p.holdMs} ms critical section`
  const how = sk === 's6'
    ? 'Each library waits as it does out of the box: lockdog 100 ms + up to 100 ms jitter, woken early by the release notice; redlock and @sesamecare-oss/redlock 10 retries, 200 ms + up to 100 ms; redis-semaphore polls every 10 ms; redlock-universal its own defaults; the hand-written lock polls like the articles\' redlock settings (200 ms + up to 100 ms). A library that gives up counts no critical section for that wait.'
    : `Every library polls with the same settings where it allows: retry delay ${s.wait.retryDelay} ms + up to ${s.wait.retryJitter} ms jitter, wait limit ${s.wait.waitTimeout} ms (redis-semaphore has no jitter); lockdog is also woken by the release notice.`
  return [
    title,
    `${how} Hand-off = from the holder calling release() to the next holder's acquire resolving. Commands = Redis-executed commands (INFO stats, including those run inside Lua scripts) per acquired lock; EVAL* = script calls per lock.`,
    table(['contender', 'critical sections/s', 'hand-off p50 µs', 'hand-off p99 µs', 'Jain', 'max/min completions', 'worst/mean wait', 'cmds/lock', 'EVAL*/lock', 'Redis CPU %', '× best peer'], body),
  ].join('\n\n')
}

function s4(report) {
  const sec = report.results.s4
  if (!sec) return null
  const counts = report.settings.nodeCounts
  const list = rows(sec).sort((a, b) => order[a.kind] - order[b.kind] || (a.m[5]?.meanUs ?? 1e9) - (b.m[5]?.meanUs ?? 1e9))
  const last = counts[counts.length - 1]
  const body = list.map((r) => [
    r.label,
    ...counts.map((n) => (r.m[n] ? `${f(r.m[n].meanUs)} (p99 ${f(r.m[n].p99Us)})` : '–')),
    r.m[last] && r.m[1] ? ratio(r.m[last].meanUs / r.m[1].meanUs) : '–',
  ])
  return [
    '### 4. Redlock: sequential acquire + release on 1, 3 and 5 nodes (mean µs per pair)',
    table(['contender', ...counts.map((n) => `${n} node${n > 1 ? 's' : ''} µs`), `${last}-node / 1-node`], body),
  ].join('\n\n')
}

function s5(report) {
  const sec = report.results.s5
  if (!sec) return null
  const s = report.settings
  const list = sortRows(rows(sec), 'mainThreadCpuPct', false)
  const body = list.map((r) => [
    r.label,
    `${f(r.m.held)} / ${f(r.m.held - r.m.alive)}`,
    f(r.m.acquireMs),
    `${f(r.m.cmdsPerSec)} (${f(r.m.expectedCmdsPerSec)})`,
    f(r.m.mainThreadCpuPct, 1),
    f(r.m.elu * 100, 1),
    f(r.m.processCpuPct, 1),
    f(r.m.redisCpuPct, 1),
    f(r.m.rssBytesPerLock),
    f(r.m.heapBytesPerLock),
    f(r.m.threads),
  ])
  return [
    `### 5. ${f(s.s5.locks)} locks held under auto-renewal, ttl ${s.renewTtl} ms, for ${s.s5.holdMs / 1000} s`,
    `Renewal every ttl/3 where the library lets us choose (redlock: automaticExtensionThreshold = 2/3·ttl; redis-semaphore: refreshInterval = ttl/3; redlock-universal: its fixed default, at 80% of ttl). Redis cmds/s counts commands run inside Lua too; in brackets the one-renewal-per-lock-per-ttl/3 rate. Main thread = /proc/self/task/<pid>/stat (Node 20 has no process.threadCpuUsage); ELU = event-loop utilization; CPU % of one core.`,
    table(['contender', 'held / lost', 'acquire all ms', 'Redis cmds/s (1 per ttl/3)', 'main-thread CPU %', 'ELU %', 'process CPU %', 'Redis CPU %', 'RSS B/lock', 'JS heap B/lock', 'threads'], body),
  ].join('\n\n')
}

function computeTargets(report) {
  const t = []
  const R = report.results
  const add = (id, target, measured, met) => t.push({ id, target, measured, met })
  if (R.s1 && R.s1.lockdog) {
    const l = R.s1.lockdog.median
    const fl = R.s1.floor && R.s1.floor.median
    const best = bestBy(peers(R.s1), 'meanUs', false)
    const beatsAll = peers(R.s1).every((p) => l.meanUs < p.m.meanUs)
    add('1a', 'sequential pairs/s ≥ 1.05× raw ioredis floor', fl ? `${f(l.opsPerSec)} vs ${f(fl.opsPerSec)} pairs/s = ${ratio(l.opsPerSec / fl.opsPerSec)} (${f(l.meanUs)} vs ${f(fl.meanUs)} µs a pair)` : 'no floor', fl ? l.opsPerSec >= 1.05 * fl.opsPerSec : null)
    add('1b', 'sequential pair faster than every peer', best ? `${f(l.meanUs)} µs vs best peer ${best.label} ${f(best.m.meanUs)} µs = ${ratio(l.meanUs / best.m.meanUs)}` : 'no peers', best ? beatsAll : null)
  }
  if (R.s2 && R.s2.lockdog) {
    const l = R.s2.lockdog.median
    const best = bestBy(peers(R.s2), 'opsPerSec', true)
    const fl = R.s2.floor && R.s2.floor.median
    const aheadOfAll = peers(R.s2).every((p) => l.opsPerSec > p.m.opsPerSec)
    add('2a', `${report.settings.s2.workers} parallel keys throughput ≥ 1.5× raw ioredis floor and ahead of every peer`, fl ? `${f(l.opsPerSec)} vs ${f(fl.opsPerSec)} pairs/s = ${ratio(l.opsPerSec / fl.opsPerSec)}; best peer ${best ? `${best.label} ${f(best.m.opsPerSec)} = ${ratio(l.opsPerSec / best.m.opsPerSec)}` : '–'}` : 'no floor', fl ? l.opsPerSec >= 1.5 * fl.opsPerSec && aheadOfAll : null)
    add('2b', 'JS thread ≤ 8 µs a pair', `${f(l.jsUsPerPair, 1)} µs (raw ioredis floor ${fl ? f(fl.jsUsPerPair, 1) : '–'})`, typeof l.jsUsPerPair === 'number' ? l.jsUsPerPair <= 8 : null)
    add('2c', 'Redis command time ≤ 3.5 µs a pair (INFO commandstats)', `${f(l.redisCommandUsPerPair, 2)} µs (raw ioredis floor ${fl ? f(fl.redisCommandUsPerPair, 2) : '–'}); the server process's CPU ${f(l.redisUsPerPair, 1)} µs, its network I/O included (floor ${fl ? f(fl.redisUsPerPair, 1) : '–'})`, typeof l.redisCommandUsPerPair === 'number' && Number.isFinite(l.redisCommandUsPerPair) ? l.redisCommandUsPerPair <= 3.5 : null)
  }
  // One wire round trip: redis-benchmark's SET p50 on one connection (scenario 1).
  const rb = R.s1 && R.s1['redis-benchmark']
  const rtt = rb && typeof rb.median.p50Us === 'number' ? rb.median.p50Us : null
  // The contention targets are judged at each library's defaults (scenario 6) when it ran.
  const sc = R.s6 && R.s6.lockdog ? 's6' : 's3'
  if (R[sc] && R[sc].lockdog) {
    const C = R[sc]
    const at = sc === 's6' ? ' (scenario 6, defaults)' : ' (scenario 3, same settings)'
    const l = C.lockdog.median
    const best = bestBy(peers(C), 'csPerSec', true)
    add('3a', `contention critical sections/s ≥ 5× best polling peer${at}`, best ? `${f(l.csPerSec)} vs ${best.label} ${f(best.m.csPerSec)} cs/s = ${ratio(l.csPerSec / best.m.csPerSec)}` : 'no peers', best ? l.csPerSec >= 5 * best.m.csPerSec : null)
    const bestH = bestBy(peers(C), 'handoffP50Us', false)
    const beatsAll = peers(C).every((p) => l.csPerSec >= p.m.csPerSec)
    add('3f', `contention critical sections/s at least every peer's${at}`, best ? `${f(l.csPerSec)} vs ${best.label} ${f(best.m.csPerSec)} cs/s = ${ratio(l.csPerSec / best.m.csPerSec)}` : 'no peers', best ? beatsAll : null)
    add('3b', 'hand-off latency p50 ≤ 2 round trips + 1 ms', `${f(l.handoffP50Us)} µs (p99 ${f(l.handoffP99Us)} µs); best peer ${bestH ? `${bestH.label} ${f(bestH.m.handoffP50Us)} µs` : '–'}`, rtt ? l.handoffP50Us <= 2 * rtt + 1000 : null)
    add('3c', 'Redis commands per acquired lock (report)', `${f(l.cmdsPerLock, 1)} (EVAL* ${f(evalsPer({ m: l }), 1)})`, null)
    add('3d', 'Jain fairness index ≥ 0.9', `${f(l.jain, 3)} (max/min completions ${f(l.maxCompletions)}/${f(l.minCompletions)})`, l.jain >= 0.9)
    add('3e', 'worst wait ≤ 3× mean wait', `${f(l.worstOverMeanWait, 1)} (worst ${f(l.worstWaitMs, 1)} ms, mean ${f(l.meanWaitMs, 1)} ms)`, l.worstOverMeanWait <= 3)
  }
  if (R.s4 && R.s4.lockdog) {
    const l = R.s4.lockdog.median
    const counts = report.settings.nodeCounts
    const last = counts[counts.length - 1]
    if (l[1] && l[last]) add('4a', `${last}-node pair time ≤ 1.5× 1-node`, `${f(l[last].meanUs)} µs vs ${f(l[1].meanUs)} µs = ${ratio(l[last].meanUs / l[1].meanUs)}`, l[last].meanUs <= 1.5 * l[1].meanUs)
    const rl = R.s4.redlock && R.s4.redlock.median[last]
    if (l[last] && rl) add('4b', `${last}-node pair faster than redlock`, `${f(l[last].meanUs)} µs vs ${f(rl.meanUs)} µs = ${ratio(l[last].meanUs / rl.meanUs)}`, l[last].meanUs < rl.meanUs)
  }
  if (R.s5 && R.s5.lockdog) {
    const l = R.s5.lockdog.median
    add('5a', 'renewal Redis commands/s vs held/(ttl/3)', `${f(l.cmdsPerSec)} cmds/s (incl. inside Lua) vs ${f(l.expectedCmdsPerSec)} renewals/s = ${ratio(l.cmdsPerSec / l.expectedCmdsPerSec)}; EVAL* ${f(((l.commands.evalsha || 0) + (l.commands.eval || 0)) / (l.holdMs / 1000))}/s; lost ${f(l.held - l.alive)}`, null)
    const calls = ((l.commands.evalsha || 0) + (l.commands.eval || 0)) / (l.holdMs / 1000)
    add('5d', 'renewal script calls/s ≤ 100 (batched); Redis CPU per held lock (report)', `${f(calls)} calls/s; Redis ${f(l.redisCpuPct, 1)} % of a core for ${f(l.held)} locks = ${f((l.redisCpuPct * 10000) / Math.max(1, l.held), 2)} ‱ of a core per lock`, calls <= 100)
    add('5b', 'main-thread CPU while holding (report)', `${f(l.mainThreadCpuPct, 2)} % of a core (ELU ${f(l.elu * 100, 2)} %), process ${f(l.processCpuPct, 1)} %`, null)
    add('5c', 'memory per held lock (report; RSS is marginal, on top of as many locks already held, and includes allocator growth for renewal batches; the core\'s exact heap per lock: `cargo test --release --test memory -- --nocapture`)', `${f(l.rssBytesPerLock)} B RSS, ${f(l.heapBytesPerLock)} B JS heap`, null)
  }
  return t
}

function renderMarkdown(report) {
  const m = report.machine
  const a = report.addon
  const head = [
    '## lockdog benchmark',
    `${m.date} · ${m.cpuModel}, ${m.cores} cores, ${m.memGB} GB · ${m.os} · Node ${m.node} · Redis ${m.redis} (throwaway servers on 127.0.0.1) · \`${m.command}\``,
    `lockdog: ${a.source}, commit ${a.commit}${a.dirty ? ' + uncommitted changes' : ''}, addon sha256 ${a.sha256.slice(0, 12)}. ${report.settings.quick ? 'QUICK run. ' : ''}Medians over ${report.settings.rounds} interleaved rounds (scenario 5: ${report.settings.s5rounds}); each run in a fresh process, contenders shuffled per round. Took ${report.durationSec} s.`,
  ]
  const targets = report.targets.length
    ? ['### Targets', table(['#', 'target', 'measured', 'met'], report.targets.map((t) => [t.id, t.target, t.measured, t.met === null ? '(report)' : t.met ? 'yes' : '**no**']))].join('\n\n')
    : null
  const notes = report.notes.length ? ['### Notes', ...report.notes.map((n) => `- ${n}`)].join('\n') : null
  return `${[head.join('\n\n'), targets, s1(report), s2(report), s3(report), s3(report, 's6'), s4(report), s5(report), notes].filter(Boolean).join('\n\n')}\n`
}

module.exports = { renderMarkdown, computeTargets }
