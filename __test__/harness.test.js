'use strict'

// Whoever starts redis-servers stops them on every exit path: killed from
// outside (even with SIGKILL), or crashed on a closed pipe. The bench's own
// arguments are checked, and a quick bench run never overwrites the full results.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { waitFor, ROOT } = require('./helpers')

const OWNER = path.join(__dirname, 'workers', 'server-owner.js')

/** Running: the PID exists and is not a zombie waiting to be reaped. */
function running(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

function owner(mode) {
  const child = spawn(process.execPath, [OWNER, mode], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.setEncoding('utf8')
  const first = new Promise((resolve) => {
    child.stdout.on('data', function onData(d) {
      out += d
      const i = out.indexOf('\n')
      if (i >= 0) {
        child.stdout.off('data', onData)
        resolve(JSON.parse(out.slice(0, i)))
      }
    })
  })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return { child, first, exited }
}

async function assertCleanedUp(info) {
  await waitFor(() => info.pids.every((p) => !running(p)), { timeout: 5000, what: `redis-servers ${info.pids.join(', ')} to be stopped` })
  await waitFor(() => info.dirs.every((d) => !fs.existsSync(d)), { timeout: 5000, what: 'their folders to be removed' })
}

test('a process killed with SIGKILL leaves no redis-server and no folder behind', async () => {
  const o = owner('wait')
  const info = await o.first
  assert.ok(info.pids.every(running))
  process.kill(o.child.pid, 'SIGKILL')
  await o.exited
  await assertCleanedUp(info)
})

test('a process that dies of EPIPE (output piped into head) leaves nothing behind', async () => {
  const o = owner('flood')
  const info = await o.first
  o.child.stdout.destroy() // the reader goes away, like `| head -1`
  const r = await o.exited
  assert.notEqual(r.code, 0)
  await assertCleanedUp(info)
})

test('bench arguments: a missing or bad value is an error; --quick writes elsewhere than bench/results/latest.*', () => {
  for (const args of [['--rounds'], ['--rounds', 'x'], ['--scenario'], ['--scenario', '9'], ['--addon', 'nope'], ['--bogus']]) {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'bench', 'run.js'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 20000 })
    assert.equal(r.status, 64, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, /^bench\/run\.js: /)
  }
  const { benchArgs } = require('../bench/lib/args')
  const results = path.join(ROOT, 'bench', 'results')
  assert.equal(benchArgs([], results).resultsDir, results)
  const quick = benchArgs(['--quick'], results)
  assert.notEqual(quick.resultsDir, results)
  assert.equal(path.dirname(quick.resultsDir), results)
  assert.deepEqual(benchArgs(['-s', '1,3', '--scenario', '5', '--rounds', '2'], results).scenarios, [1, 3, 5])
})

test('the fault checker: a killed writer\'s unanswered last write is in doubt, every other missing write is lost', () => {
  const { lostUpdates } = require('./faults/checker')
  const iv = (k, death, writes) => ({ k, death, writes: writes.map(([v, applied]) => ({ v, applied })) })
  // Killed after logging write 3 and before its reply: the counter shows 2 or 3.
  const killed = [iv('a', 100, [[1, true], [2, true], [3, false]])]
  assert.equal(lostUpdates(killed, { a: 2 }).total, 0)
  assert.equal(lostUpdates(killed, { a: 3 }).total, 0)
  assert.equal(lostUpdates(killed, { a: 3 }).per.a.extra, 0)
  assert.equal(lostUpdates(killed, { a: 4 }).per.a.extra, 1)
  // An answered write missing from the counter is lost, killed writer or not.
  assert.equal(lostUpdates(killed, { a: 1 }).total, 1)
  // A live writer's unanswered write is not in doubt: it was sent and must show.
  assert.equal(lostUpdates([iv('a', Infinity, [[1, true], [2, false]])], { a: 1 }).total, 1)
  // The next holder rewriting the value the killed one never applied is no duplicate;
  // two answered writes of one value are.
  assert.equal(lostUpdates([iv('a', 100, [[1, true], [2, false]]), iv('a', Infinity, [[2, true]])], { a: 2 }).total, 0)
  assert.equal(lostUpdates([iv('a', 100, [[1, true], [2, true]]), iv('a', Infinity, [[2, true]])], { a: 2 }).total, 1)
})
