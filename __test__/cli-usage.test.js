'use strict'

// The command line's usage errors name what is wrong and the flag it came in
// (exit 64), and `exec --wait` waits out a Redis outage within --wait.

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startRedis, freePort, sleep, ROOT } = require('./helpers')

const BIN = path.join(ROOT, 'bin', 'lockdog.js')
const servers = []
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-cli-usage-'))

after(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  fs.rmSync(tmp, { recursive: true, force: true })
})

function env(extra = {}) {
  const e = { ...process.env, ...extra }
  for (const v of ['LOCKDOG_NODES', 'LOCKDOG_SENTINELS', 'LOCKDOG_SENTINEL_NAME']) if (!(v in extra)) delete e[v]
  return e
}

/** `lockdog ...args` to its end, against a port nothing listens on unless `url` says otherwise. */
function lockdog(args, { url = 'redis://127.0.0.1:1', extra = {} } = {}) {
  return spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 20000, env: env({ REDIS_URL: url, ...extra }) })
}

function usageError(r, pattern) {
  assert.equal(r.status, 64, `exit ${r.status}: ${r.stderr}`)
  assert.match(r.stderr, pattern)
  assert.doesNotMatch(r.stderr, /needs a value/)
}

test('--sentinel-name without --sentinel (and LOCKDOG_SENTINELS unset) is a usage error', () => {
  for (const sub of [['exec', '-k', 'k', '--', 'true'], ['status', 'k'], ['release', '--force', 'k']]) {
    usageError(lockdog([sub[0], '--sentinel-name', 'mymaster', ...sub.slice(1)]), /--sentinel-name goes with --sentinel/)
    usageError(lockdog([sub[0], '--url', 'redis://127.0.0.1:1', '--sentinel-name', 'mymaster', ...sub.slice(1)]), /--sentinel-name goes with --sentinel/)
  }
})

test('negative durations and exit codes say what is wrong with the value', () => {
  for (const [flag, value] of [['--ttl', '-1'], ['--wait', '-5'], ['--kill-after', '-1'], ['-w', '-0.5'], ['--retry-delay', '-.5']]) {
    const name = flag === '-w' ? 'wait' : flag.slice(2)
    usageError(lockdog(['exec', flag, value, '-k', 'k', '--', 'true']), new RegExp(`--${name}: ${value.replace('.', '\\.')} is negative`))
  }
  usageError(lockdog(['exec', '-E', '-1', '-k', 'k', '--', 'true']), /--conflict-exit-code: '-1' is not an exit status \(0\.\.255\)/)
  usageError(lockdog(['exec', '--lost-exit-code', '-3', '-k', 'k', '--', 'true']), /--lost-exit-code: '-3' is not an exit status/)
  usageError(lockdog(['exec', '--connect-timeout', '-1', '-k', 'k', '--', 'true']), /--connect-timeout: -1 is negative/)
  // COMMAND's own negative arguments stay COMMAND's.
  const r = lockdog(['exec', '-k', 'k', '--', 'ls', '-1'])
  assert.equal(r.status, 69, r.stderr)
})

test('--ttl is checked before rounding: 0.4999 is refused like 499ms', () => {
  for (const ttl of ['0.4999', '499ms', '499.9ms', '0.0083m']) {
    usageError(lockdog(['exec', '--ttl', ttl, '-k', 'k', '--', 'true']), /--ttl: .* is too short \(at least 500 ms/)
  }
  // 0.5 s is the shortest allowed: it gets as far as connecting.
  assert.equal(lockdog(['exec', '--ttl', '0.5', '-k', 'k', '--', 'true']).status, 69)
})

test('a non-PEM --tls-ca file and a 70,000-byte --prefix name the flag', () => {
  const notPem = path.join(tmp, 'not-a-ca.txt')
  fs.writeFileSync(notPem, 'hello\n')
  const r = lockdog(['status', '--url', 'rediss://127.0.0.1:1', '--tls-ca', notPem, 'k'])
  usageError(r, new RegExp(`--tls-ca ${notPem.replace(/[.]/g, '\\.')}: .*PEM`))
  assert.doesNotMatch(r.stderr, /--url:/)
  const p = lockdog(['exec', '--prefix', 'p'.repeat(70_000), '-k', 'k', '--', 'true'])
  usageError(p, /--prefix: .*at most 65536 bytes/)
  assert.doesNotMatch(p.stderr, /REDIS_URL:/)
})

/** Runs `lockdog ...args` in the background: resolves { status, stderr, ms }. */
function background(args, url) {
  const t0 = performance.now()
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: env({ REDIS_URL: url }), stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stderr, ms: performance.now() - t0 })))
}

test('exec --wait waits out a Redis restart; past --wait it exits 69; without --wait it fails at once', async () => {
  const s = await startRedis()
  servers.push(s)
  await s.kill()
  const ran = path.join(tmp, 'ran')
  const script = `require('fs').writeFileSync(${JSON.stringify(ran)}, 'yes')`
  const waiting = background(['exec', '--wait', '10', '-k', 'cli:outage', '--', process.execPath, '-e', script], s.url)
  await sleep(1000)
  await s.start()
  const r = await waiting
  assert.equal(r.status, 0, r.stderr)
  assert.equal(fs.readFileSync(ran, 'utf8'), 'yes')
  await s.kill()
  try {
    const short = await background(['exec', '-v', '--wait', '1', '--connect-timeout', '0.3', '-k', 'cli:outage', '--', 'true'], s.url)
    assert.equal(short.status, 69, short.stderr)
    assert.match(short.stderr, /gave up waiting for lock "cli:outage" after 1000 ms \(--wait\): Redis at 127\.0\.0\.1:\d+: unreachable/)
    assert.match(short.stderr, /waiting for Redis/)
    assert.ok(short.ms >= 1000, `gave up after ${short.ms} ms`)
    for (const flags of [[], ['-n'], ['--wait', '0']]) {
      const once = await background(['exec', '-v', ...flags, '--connect-timeout', '0.3', '-k', 'cli:outage', '--', 'true'], s.url)
      assert.equal(once.status, 69, once.stderr)
      assert.match(once.stderr, /cannot take lock "cli:outage": Redis at 127\.0\.0\.1:\d+: unreachable/)
      assert.doesNotMatch(once.stderr, /waiting/, `${flags.join(' ')}: one attempt, no wait`)
    }
  } finally {
    await s.start()
  }
})

test('an unused port stays refused for the whole --wait (the error names the node)', async () => {
  const port = await freePort()
  const r = lockdog(['exec', '--wait', '0.5', '--connect-timeout', '0.2', '-k', 'k', '--', 'true'], { url: `redis://127.0.0.1:${port}` })
  assert.equal(r.status, 69, r.stderr)
  assert.match(r.stderr, new RegExp(`127\\.0\\.0\\.1:${port}`))
})
