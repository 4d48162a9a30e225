'use strict'

// bin/lockdog.js, run as a child process against real redis-servers.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LockClient } = require('..')
const { startRedis, inspector, waitFor, freePort, ROOT } = require('./helpers')

const BIN = path.join(ROOT, 'bin', 'lockdog.js')
const CHILD = path.join(__dirname, 'workers', 'cli-child.js')
const NODE = process.execPath
const { version } = require('../package.json')

let server
let redis
let tmp
let n = 0

before(async () => {
  server = await startRedis()
  redis = inspector(server)
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-cli-'))
})

after(async () => {
  redis.disconnect()
  await server.stop()
  fs.rmSync(tmp, { recursive: true, force: true })
})

/** A fresh path in the test's temporary directory. */
const file = (name) => path.join(tmp, `${name}-${++n}`)

/**
 * Runs `node bin/lockdog.js ...args` with REDIS_URL pointing at the test server.
 * `out` collects stdout lines (JSON-parsed when they parse); `exited` resolves
 * { code, signal, stdout, stderr, lines, ms }.
 */
function cli(args, { env = {}, input, bin = [NODE, BIN] } = {}) {
  const t0 = performance.now()
  const baseEnv = { ...process.env, REDIS_URL: server.url }
  delete baseEnv.LOCKDOG_NODES
  delete baseEnv.LOCKDOG_SENTINELS
  delete baseEnv.LOCKDOG_SENTINEL_NAME
  const child = spawn(bin[0], [...bin.slice(1), ...args], {
    cwd: ROOT,
    env: { ...baseEnv, ...env },
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  })
  if (input !== undefined) child.stdin.end(input)
  const run = { child, stdout: '', stderr: '', lines: [] }
  let rest = ''
  child.stdout.on('data', (d) => {
    run.stdout += d
    rest += d
    let i
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i)
      rest = rest.slice(i + 1)
      try {
        run.lines.push(JSON.parse(line))
      } catch {
        run.lines.push(line)
      }
    }
  })
  child.stderr.on('data', (d) => {
    run.stderr += d
  })
  run.exited = new Promise((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout: run.stdout, stderr: run.stderr, lines: run.lines, ms: performance.now() - t0 }))
  })
  run.line = (pred, what = 'a line') => waitFor(() => run.lines.find((l) => typeof l === 'object' && l && pred(l)), { timeout: 10000, what })
  return run
}

const holdArgs = (marker, ...extra) => [NODE, CHILD, 'hold', marker, ...extra]

test('--help and --version (the file runs by its shebang)', async () => {
  const stat = fs.statSync(BIN)
  assert.ok(stat.mode & 0o111, 'bin/lockdog.js is executable')
  assert.match(fs.readFileSync(BIN, 'utf8'), /^#!\/usr\/bin\/env node\n/)
  // `env node` finds this test's Node first (a shell's own node may be older than 22).
  const v = await cli(['--version'], { bin: [BIN], env: { PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` } }).exited
  assert.equal(v.code, 0, v.stderr)
  assert.equal(v.stdout, `lockdog ${version}\n`)
  const h = await cli(['--help']).exited
  assert.equal(h.code, 0)
  for (const word of ['lockdog exec', 'lockdog status', 'lockdog release --force', '--nodes', 'REDIS_URL', 'Exit status', '75', '79']) {
    assert.ok(h.stdout.includes(word), `help mentions ${word}`)
  }
  assert.equal((await cli(['exec', '--help']).exited).code, 0)
})

test('exec passes the exit status through: 0, 3, and 128+N for death by signal N', async () => {
  const cases = [
    [['sh', '-c', 'exit 0'], 0],
    [['sh', '-c', 'exit 3'], 3],
    [['sh', '-c', 'exit 255'], 255],
    [['sh', '-c', 'kill -TERM $$'], 128 + os.constants.signals.SIGTERM],
    [['sh', '-c', 'kill -KILL $$'], 128 + os.constants.signals.SIGKILL],
    [['sh', '-c', 'kill -INT $$'], 128 + os.constants.signals.SIGINT],
  ]
  for (const [command, want] of cases) {
    const r = await cli(['exec', '--key', 'exit:codes', '--', ...command]).exited
    assert.equal(r.code, want, `${command.join(' ')}: ${r.stderr}`)
    assert.equal(await redis.exists('exit:codes'), 0, 'released after the command')
  }
  // Without `--`, the command's own options stay the command's (here sh's -c).
  const bare = await cli(['exec', '-k', 'exit:codes', 'sh', '-c', 'exit 4']).exited
  assert.equal(bare.code, 4, bare.stderr)
  // The key as the first operand, flock-style; and -c STRING through /bin/sh.
  const flockish = await cli(['exec', 'exit:codes', '-c', 'test "$LOCKDOG_KEY" = exit:codes && exit 5']).exited
  assert.equal(flockish.code, 5, flockish.stderr)
  const shell = await cli(['exec', '-k', 'exit:codes', '--shell', '--', 'exit', '6']).exited
  assert.equal(shell.code, 6, shell.stderr)
})

test('stdin and stdout are the command\'s own', async () => {
  const r = await cli(['exec', '-k', 'stdio', '--', 'cat'], { input: 'through the lock\n' }).exited
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, 'through the lock\n')
  assert.equal(r.stderr, '')
})

test('the key is held while the command runs and gone after; status shows both (human and --json)', async () => {
  const marker = file('marker')
  const run = cli(['exec', '--key', 'held:k', '--fencing', '--', ...holdArgs(marker)])
  const ready = await run.line((l) => l.ready, 'the command to start')
  assert.equal(ready.key, 'held:k')
  assert.match(ready.fence, /^\d+$/, 'LOCKDOG_FENCE with --fencing')
  const token = await redis.get('held:k')
  assert.ok(token, 'the key exists while the command runs')
  const pttl = await redis.pttl('held:k')
  assert.ok(pttl > 25000 && pttl <= 30000, `default ttl 30 s, pttl ${pttl}`)

  const human = await cli(['status', 'held:k']).exited
  assert.equal(human.code, 1, 'status exits 1 when held')
  assert.match(human.stdout, /^held:k: held \(\d+ ms left, holder [0-9a-f]{8}…, fence \d+\)\n$/)
  assert.ok(human.stdout.includes(token.slice(0, 8)))
  assert.ok(!human.stdout.includes(token), 'the full token is never printed')
  const json = await cli(['status', '--json', 'held:k']).exited
  assert.equal(json.code, 1)
  const info = JSON.parse(json.stdout)
  assert.equal(info.key, 'held:k')
  assert.equal(info.held, true)
  assert.ok(info.remainingMs > 25000 && info.remainingMs <= 30000)
  assert.equal(info.holder, `${token.slice(0, 8)}…`)
  assert.equal(info.fence, Number(ready.fence))

  fs.writeFileSync(marker, '')
  const r = await run.exited
  assert.equal(r.code, 0, r.stderr)
  assert.equal(await redis.exists('held:k'), 0, 'released when the command exited')

  const free = await cli(['status', 'held:k', '--json']).exited
  assert.equal(free.code, 0, 'status exits 0 when free')
  assert.deepEqual(JSON.parse(free.stdout), { key: 'held:k', held: false, remainingMs: null, holder: null, fence: Number(ready.fence) })
  const freeHuman = await cli(['status', 'never:held']).exited
  assert.equal(freeHuman.code, 0)
  assert.equal(freeHuman.stdout, 'never:held: free\n')
  const several = await cli(['status', '--json', 'never:held', 'held:k']).exited
  assert.equal(several.code, 0)
  assert.deepEqual(several.lines.map((l) => l.key), ['never:held', 'held:k'])
})

test('--prefix: the key in Redis carries the prefix; status with the same prefix sees it', async () => {
  const marker = file('marker')
  const run = cli(['exec', '--prefix', 'app:', '-k', 'pfx', '--', ...holdArgs(marker)])
  await run.line((l) => l.ready)
  assert.equal(await redis.exists('app:pfx'), 1)
  assert.equal(await redis.exists('pfx'), 0)
  assert.equal((await cli(['status', '--prefix', 'app:', 'pfx']).exited).code, 1)
  assert.equal((await cli(['status', 'pfx']).exited).code, 0)
  fs.writeFileSync(marker, '')
  assert.equal((await run.exited).code, 0)
  assert.equal(await redis.exists('app:pfx'), 0)
})

test('a held lock: -n fails at once, --wait gives up after its time, both with 75 (or -E), the command never runs', async () => {
  const holder = new LockClient({ url: server.url })
  const lock = await holder.acquire('busy')
  try {
    const ran = file('ran')
    const nb = await cli(['exec', '-n', '-k', 'busy', '--', 'touch', ran]).exited
    assert.equal(nb.code, 75, nb.stderr)
    assert.match(nb.stderr, /lockdog: lock "busy" is held by another owner \(\d+ ms left on its lease\); not waiting/)
    assert.ok(nb.ms < 3000, `-n took ${nb.ms} ms`)

    const w = await cli(['exec', '--wait', '400ms', '-k', 'busy', '--', 'touch', ran]).exited
    assert.equal(w.code, 75, w.stderr)
    assert.match(w.stderr, /gave up waiting for lock "busy" after 400 ms/)
    assert.ok(w.ms >= 400, `--wait 400 returned after ${w.ms} ms`)

    const e = await cli(['exec', '-n', '-E', '1', '-k', 'busy', '--', 'touch', ran]).exited
    assert.equal(e.code, 1, '-E sets the conflict exit status')
    const w0 = await cli(['exec', '-w', '0', '-k', 'busy', '--', 'touch', ran]).exited
    assert.equal(w0.code, 75)

    assert.equal(fs.existsSync(ran), false, 'the command never ran')
    assert.equal(await redis.get('busy'), lock.token, 'the holder still holds it')
  } finally {
    await lock.release()
    await holder.close()
  }
})

test('without --wait, exec waits for the holder and then runs', async () => {
  const markerA = file('a')
  const markerB = file('b')
  const a = cli(['exec', '-k', 'queue', '--', ...holdArgs(markerA)])
  await a.line((l) => l.ready)
  const b = cli(['exec', '-v', '--retry-delay', '20ms', '-k', 'queue', '--', ...holdArgs(markerB)])
  await waitFor(() => b.stderr.includes('waiting for lock "queue"'), { what: 'b to report waiting' })
  // b is waiting, not running, while a runs; probe a few times.
  for (let i = 0; i < 5; i++) {
    assert.equal(b.lines.length, 0, 'b has not started its command')
    await redis.ping()
  }
  fs.writeFileSync(markerA, '')
  assert.equal((await a.exited).code, 0)
  const ready = await b.line((l) => l.ready, 'b to start after a')
  assert.equal(ready.key, 'queue')
  assert.ok(await redis.exists('queue'))
  fs.writeFileSync(markerB, '')
  const rb = await b.exited
  assert.equal(rb.code, 0, rb.stderr)
  assert.match(rb.stderr, /acquired lock "queue"/)
  assert.match(rb.stderr, /released lock "queue"/)
  assert.equal(await redis.exists('queue'), 0)
})

test('mutual exclusion: concurrent execs appending to one file never overlap', async () => {
  const log = file('log')
  const runs = Array.from({ length: 6 }, (_, i) =>
    cli(['exec', '--retry-delay', '10ms', '-k', 'mutex', '--', NODE, CHILD, 'append', log, `w${i}`, '40']))
  const results = await Promise.all(runs.map((r) => r.exited))
  for (const r of results) assert.equal(r.code, 0, r.stderr)
  const lines = fs.readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' '))
  assert.equal(lines.length, 12)
  const seen = new Set()
  for (let i = 0; i < lines.length; i += 2) {
    const [id, kind, t] = lines[i]
    const [id2, kind2, t2] = lines[i + 1]
    assert.equal(kind, 'start', `line ${i}`)
    assert.equal(kind2, 'end', `line ${i + 1}`)
    assert.equal(id2, id, `${id} started and ${id2} ended: overlap`)
    assert.ok(BigInt(t2) >= BigInt(t))
    if (i + 2 < lines.length) assert.ok(BigInt(lines[i + 2][2]) >= BigInt(t2), `${lines[i + 2][0]} started before ${id} ended`)
    seen.add(id)
  }
  assert.equal(seen.size, 6)
  assert.equal(await redis.exists('mutex'), 0)
})

test('SIGTERM, SIGINT, SIGHUP and SIGUSR2 to the CLI are forwarded to the command; the lock is released', async () => {
  const cases = [['SIGTERM', 42], ['SIGINT', 43], ['SIGHUP', 44], ['SIGUSR2', 45]]
  for (const [sig, code] of cases) {
    const marker = file('never')
    const run = cli(['exec', '-k', 'sig', '--', ...holdArgs(marker, '--trap', `${sig}:${code}`)])
    await run.line((l) => l.ready)
    assert.equal(await redis.exists('sig'), 1)
    run.child.kill(sig)
    const r = await run.exited
    assert.equal(r.code, code, `${sig}: ${r.stderr}`)
    assert.ok(r.lines.some((l) => l.signal === sig), `the command got ${sig}`)
    assert.equal(await redis.exists('sig'), 0, 'released')
  }
  // A command that does not handle it dies of it: 128+N.
  const run = cli(['exec', '-k', 'sig', '--', ...holdArgs(file('never'))])
  await run.line((l) => l.ready)
  run.child.kill('SIGTERM')
  const r = await run.exited
  assert.equal(r.code, 128 + os.constants.signals.SIGTERM, r.stderr)
  assert.equal(await redis.exists('sig'), 0)
})

const haveScript = spawnSync('script', ['--version']).status === 0

test('Ctrl-C on a terminal reaches the command once, not twice', { skip: !haveScript && 'needs script(1) for a pty' }, async () => {
  // script(1) runs the CLI on a pty, in the foreground process group; writing ^C to
  // the pty makes the terminal send SIGINT to that whole group, the command included.
  const marker = file('never')
  const line = [NODE, BIN, 'exec', '-k', 'tty', '--', ...holdArgs(marker, '--ignore', 'SIGINT', '--trap', 'SIGTERM:3')]
    .map((a) => `'${a}'`).join(' ')
  // `exec`: script(1) runs the line with $SHELL -c, and a shell that stayed in between
  // (dash does) would itself die of the ^C and end the session early.
  const term = spawn('script', ['-q', '-e', '-c', `exec ${line}`, '/dev/null'], {
    env: { ...process.env, REDIS_URL: server.url },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  term.stdout.on('data', (d) => { out += d })
  const exited = new Promise((resolve) => term.on('close', (code) => resolve(code)))
  try {
    const ready = await waitFor(() => /\{"ready":true,"pid":(\d+)/.exec(out), { what: 'the command on the pty' })
    term.stdin.write('\x03')
    await waitFor(() => out.includes('{"ignored":"SIGINT"}'), { what: 'the command to get SIGINT' })
    // The CLI is the command's parent. A SIGTERM sent to it after the ^C is forwarded
    // after any forwarded SIGINT, so when the command reports it, every SIGINT is in.
    const stat = fs.readFileSync(`/proc/${ready[1]}/stat`, 'utf8')
    const cliPid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    process.kill(cliPid, 'SIGTERM')
    assert.equal(await exited, 3, out)
    assert.ok(out.includes('{"signal":"SIGTERM"}'), out)
    assert.equal(out.match(/\{"ignored":"SIGINT"\}/g).length, 1, `SIGINT delivered once: ${out}`)
    assert.equal(await redis.exists('tty'), 0)
  } finally {
    if (term.exitCode === null) term.kill('SIGKILL')
  }
})

test('Redis unresponsive past the TTL: the lock counts as lost, the command gets SIGTERM', async () => {
  const run = cli(['exec', '--ttl', '600ms', '--command-timeout', '200ms', '-k', 'paused', '--', ...holdArgs(file('never'), '--trap', 'SIGTERM:0')])
  await run.line((l) => l.ready)
  server.pause()
  let r
  try {
    r = await run.exited
  } finally {
    server.resume()
  }
  assert.equal(r.code, 79, r.stderr)
  assert.match(r.stderr, /LOST lock "paused" while the command was running/)
  assert.ok(r.lines.some((l) => l.signal === 'SIGTERM'))
  await waitFor(async () => (await redis.exists('paused')) === 0, { what: 'the key to expire' })
})

test('SIGTERM while waiting for the lock: exits 128+15 at once, never runs the command, takes nothing', async () => {
  const holder = new LockClient({ url: server.url })
  const lock = await holder.acquire('sig:wait')
  const ran = file('ran')
  const run = cli(['exec', '-v', '-k', 'sig:wait', '--', 'touch', ran])
  await waitFor(() => run.stderr.includes('waiting for lock'), { what: 'the CLI to wait' })
  const t0 = performance.now()
  run.child.kill('SIGTERM')
  const r = await run.exited
  assert.equal(r.code, 143, r.stderr)
  assert.ok(performance.now() - t0 < 2000)
  assert.equal(fs.existsSync(ran), false)
  assert.equal(await redis.get('sig:wait'), lock.token)
  assert.equal(await lock.release(), true)
  assert.equal(await redis.exists('sig:wait'), 0, 'nothing left behind by the interrupted CLI')
  await holder.close()
})

test('a command outlasting the TTL keeps the lock: the watchdog renews it', async () => {
  // Long enough that a stall of the machine (a second) does not outlast
  // what is left after a renewal; the test still runs three TTLs.
  const ttl = 1500
  const marker = file('marker')
  const run = cli(['exec', '--ttl', `${ttl}ms`, '-k', 'long', '--', ...holdArgs(marker)])
  await run.line((l) => l.ready)
  const token = await redis.get('long')
  assert.ok(token)
  const t0 = performance.now()
  while (performance.now() - t0 < ttl * 3) {
    assert.equal(await redis.get('long'), token, 'still ours after ' + Math.round(performance.now() - t0) + ' ms')
    const pttl = await redis.pttl('long')
    assert.ok(pttl > 0 && pttl <= ttl, `pttl ${pttl}`)
    await new Promise((r) => setTimeout(r, 25))
  }
  fs.writeFileSync(marker, '')
  const r = await run.exited
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stderr, '', 'no loss reported')
  assert.equal(await redis.exists('long'), 0)
})

test('release refuses without --force; with --force it deletes the key and the holder finds out', async () => {
  const holder = new LockClient({ url: server.url, ttl: 900 })
  const lock = await holder.acquire('rel')
  const refused = await cli(['release', 'rel']).exited
  assert.equal(refused.code, 64)
  assert.match(refused.stderr, /refusing to delete "rel" without --force/)
  assert.match(refused.stderr, /unsafe/)
  assert.equal(await redis.get('rel'), lock.token, 'untouched')

  const forced = await cli(['release', '--force', 'rel']).exited
  assert.equal(forced.code, 0, forced.stderr)
  assert.equal(forced.stdout, 'rel: force-released (the key existed on 1 of 1 node).\n')
  assert.equal(await redis.exists('rel'), 0)
  await waitFor(() => lock.signal.aborted, { timeout: 2000, what: 'the holder to notice' })
  assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')

  const again = await cli(['release', '-f', '--json', 'rel']).exited
  assert.equal(again.code, 0)
  assert.deepEqual(JSON.parse(again.stdout), { key: 'rel', deleted: 0, nodes: 1, held: false })
  const human = await cli(['release', '-f', 'rel']).exited
  assert.equal(human.stdout, 'rel: not held (the key existed on none of 1 node).\n')
  await holder.close()
})

test('lock lost while the command runs: SIGTERM to the command, exit 79', async () => {
  const run = cli(['exec', '--ttl', '600ms', '-k', 'lost', '--', ...holdArgs(file('never'), '--trap', 'SIGTERM:0')])
  await run.line((l) => l.ready)
  const t0 = performance.now()
  assert.equal(await redis.del('lost'), 1)
  const r = await run.exited
  assert.equal(r.code, 79, r.stderr)
  assert.ok(performance.now() - t0 < 2000, 'noticed within a renewal period or so')
  assert.ok(r.lines.some((l) => l.signal === 'SIGTERM'), 'the command got SIGTERM')
  assert.match(r.stderr, /LOST lock "lost" while the command was running/)
  assert.match(r.stderr, /sending SIGTERM to the command \(pid \d+\)/)
  assert.match(r.stderr, /exited with status 0 after losing the lock; exiting with 79/)
  assert.equal(await redis.exists('lost'), 0)
})

test('lock lost: --on-lost=kill, --kill-after, --on-lost=ignore, --lost-exit-code', async () => {
  // kill: SIGKILL right away, even to a command that ignores SIGTERM.
  let run = cli(['exec', '--ttl', '600ms', '--on-lost', 'kill', '-k', 'lost2', '--', ...holdArgs(file('never'), '--ignore', 'SIGTERM')])
  await run.line((l) => l.ready)
  await redis.del('lost2')
  let r = await run.exited
  assert.equal(r.code, 79, r.stderr)
  assert.match(r.stderr, /sending SIGKILL/)
  assert.match(r.stderr, /was killed by SIGKILL/)

  // term + --kill-after: SIGTERM is ignored, SIGKILL follows.
  run = cli(['exec', '--ttl', '600ms', '--kill-after', '0.2', '--lost-exit-code', '9', '-k', 'lost2', '--', ...holdArgs(file('never'), '--ignore', 'SIGTERM')])
  await run.line((l) => l.ready)
  await redis.del('lost2')
  r = await run.exited
  assert.equal(r.code, 9, r.stderr)
  assert.ok(r.lines.some((l) => l.ignored === 'SIGTERM'))
  assert.match(r.stderr, /still running; sending SIGKILL/)

  // ignore: the command runs on to its end; the exit status still says the lock was lost.
  const marker = file('marker')
  run = cli(['exec', '--ttl', '600ms', '--on-lost=ignore', '-k', 'lost2', '--', ...holdArgs(marker)])
  await run.line((l) => l.ready)
  await redis.del('lost2')
  await waitFor(() => run.stderr.includes('runs on WITHOUT the lock'), { what: 'the loss to be reported' })
  assert.equal(run.child.exitCode, null, 'still running')
  fs.writeFileSync(marker, '')
  r = await run.exited
  assert.equal(r.code, 79, r.stderr)
  assert.ok(r.lines.some((l) => l.done), 'the command finished its work')
})

test('a key deleted just before the command ends is reported as lost too (release found it gone)', async () => {
  // A long ttl: the watchdog's next renewal is 10 s away, so only the release can tell.
  const marker = file('marker')
  const run = cli(['exec', '--ttl', '30', '-k', 'gone', '--', ...holdArgs(marker)])
  await run.line((l) => l.ready)
  await redis.del('gone')
  fs.writeFileSync(marker, '')
  const r = await run.exited
  assert.equal(r.code, 79, r.stderr)
  assert.match(r.stderr, /was gone when the command ended/)
})

test('command not found: 127; not executable: 126; the lock is released', async () => {
  const nf = await cli(['exec', '-k', 'nf', '--', 'lockdog-no-such-command-xyz']).exited
  assert.equal(nf.code, 127)
  assert.match(nf.stderr, /lockdog-no-such-command-xyz: command not found/)
  const script = file('noexec')
  fs.writeFileSync(script, '#!/bin/sh\nexit 0\n', { mode: 0o644 })
  const ne = await cli(['exec', '-k', 'nf', '--', script]).exited
  assert.equal(ne.code, 126, ne.stderr)
  assert.equal(await redis.exists('nf'), 0)
})

test('bad usage exits 64 with a helpful message', async () => {
  const cases = [
    [[], /missing command: exec, status or release/],
    [['frob'], /unknown command 'frob'/],
    [['exec', '--', 'true'], /exec: missing the lock key \(--key KEY\)/],
    [['exec', '-k', 'u'], /exec: missing the command to run/],
    [['exec', '-k', 'u', '--ttl', 'soon', 'true'], /--ttl: 'soon' is not a duration/],
    [['exec', '-k', 'u', '--ttl', '0', 'true'], /--ttl: 0 is too short \(at least 500 ms/],
    [['exec', '-k', 'u', '--ttl', '3ms', 'true'], /--ttl: 3ms is too short \(at least 500 ms: a shorter lease cannot be renewed in time\)/],
    [['exec', '-k', 'u', '--ttl', '5', 's', '--', 'true'], /--ttl 5 s: write the unit without a space \(5s\)/],
    [['exec', '-k', 'u', '--ttl', '5', 's', 'true'], /--ttl 5 s: write the unit without a space/],
    [['exec', 'u', '-k', 'v', '--', 'true'], /unexpected operand 'u' before '--'/],
    [['status', '--connect-timeout', '2', 's', 'u'], /--connect-timeout 2 s: write the unit without a space/],
    [['exec', '-k', 'u', '--bogus', 'true'], /unknown option '--bogus'/],
    [['exec', '-k', 'u', '-z', 'true'], /unknown option '-z'/],
    [['exec', '-k', 'u', '--wait'], /option '--wait' needs a value/],
    [['exec', '-k', 'u', '--on-lost=maybe', 'true'], /--on-lost must be one of term, kill, ignore/],
    [['exec', '-k', 'u', '-n', '-w', '5', 'true'], /--nonblock or --wait, not both/],
    [['exec', '-k', 'u', '-c', 'true', 'true'], /either -c STRING or COMMAND/],
    [['exec', '-k', 'u', '-E', '300', 'true'], /not an exit status/],
    [['status'], /status: missing the lock key/],
    [['status', 'u', '--force'], /status: unknown option '--force'/],
    [['release', '--force'], /release: missing the lock key/],
    [['status', '--url', 'redis://127.0.0.1:1', '--nodes', 'redis://127.0.0.1:2', 'u'], /--url or --nodes, not both/],
    [['exec', '--url', 'http://user:hunter2@example:6379', '-k', 'u', 'true'], /--url: .*redis:\/\//],
    [['status', '--nodes', ' , ', 'u'], /--nodes: expected comma-separated Redis URLs/],
    [['status', '--url', 'redis://127.0.0.1:1', '--sentinel', 'redis://127.0.0.1:2', 'u'], /one of --url, --nodes or --sentinel/],
    [['status', '--sentinel', 'redis://127.0.0.1:2', 'u'], /--sentinel needs --sentinel-name NAME/],
    [['status', '--sentinel', 'redis://127.0.0.1:2', '--sentinel-name', 'm', '--tls-ca', __filename, 'u'], /--sentinel: .*tls/],
    [['status', '--tls-cert', __filename, 'u'], /--tls-cert and --tls-key go together/],
    [['status', '--tls-ca', '/nonexistent/ca.pem', 'u'], /--tls-ca: cannot read \/nonexistent\/ca.pem: ENOENT/],
  ]
  for (const [args, message] of cases) {
    const r = await cli(args).exited
    assert.equal(r.code, 64, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, message, args.join(' '))
    assert.match(r.stderr, /Try 'lockdog (exec |status |release )?--help'/)
    assert.ok(!r.stderr.includes('hunter2'), 'no password echoed')
    assert.equal(r.stdout, '')
  }
  const env = await cli(['status', 'u'], { env: { REDIS_URL: 'mysql://root:hunter2@db' } }).exited
  assert.equal(env.code, 64)
  assert.match(env.stderr, /REDIS_URL: /)
  assert.ok(!env.stderr.includes('hunter2'))
})

test('Redis unreachable: 69, quickly, and the command never runs', async () => {
  const port = await freePort()
  const env = { REDIS_URL: `redis://user:hunter2@127.0.0.1:${port}` }
  const ran = file('ran')
  const runs = [
    cli(['exec', '-k', 'down', '--', 'touch', ran], { env }),
    cli(['status', 'down'], { env }),
    cli(['release', '--force', 'down'], { env }),
    cli(['exec', '--url', `redis://127.0.0.1:${port}`, '-k', 'down', '--', 'touch', ran]),
  ]
  for (const run of runs) {
    const r = await run.exited
    assert.equal(r.code, 69, r.stderr)
    assert.ok(r.ms < 4000, `took ${r.ms} ms`)
    assert.match(r.stderr, new RegExp(`127\\.0\\.0\\.1:${port}`))
    assert.ok(!r.stderr.includes('hunter2'), 'no password printed')
  }
  assert.equal(fs.existsSync(ran), false)
})

test('a password-protected Redis: REDIS_URL with credentials works; a wrong password is 69 and never printed', async () => {
  const secured = await startRedis()
  try {
    assert.equal(await secured.command('CONFIG SET requirepass hunter2'), '+OK')
    const good = { REDIS_URL: `redis://:hunter2@127.0.0.1:${secured.port}` }
    const r = await cli(['exec', '-v', '-k', 'auth', '--', 'sh', '-c', 'exit 0'], { env: good }).exited
    assert.equal(r.code, 0, r.stderr)
    assert.ok(!r.stderr.includes('hunter2'))
    const s = await cli(['status', 'auth'], { env: good }).exited
    assert.equal(s.code, 0, s.stderr)
    const bad = await cli(['status', 'auth'], { env: { REDIS_URL: `redis://:wrong-pw-7@127.0.0.1:${secured.port}` } }).exited
    assert.equal(bad.code, 69, bad.stderr)
    assert.ok(!bad.stderr.includes('wrong-pw-7'), bad.stderr)
  } finally {
    await secured.stop()
  }
})

test('Redlock: --nodes (and LOCKDOG_NODES) take the lock on a majority of nodes', async () => {
  const extra = [await startRedis(), await startRedis()]
  const all = [server, ...extra]
  const clients = all.map(inspector)
  for (const c of clients) c.on('error', () => {}) // two of them are killed below
  try {
    const nodes = all.map((s) => s.url).join(',')
    const marker = file('marker')
    const run = cli(['exec', '--nodes', nodes, '-k', 'rl', '--', ...holdArgs(marker)])
    await run.line((l) => l.ready)
    const tokens = await Promise.all(clients.map((c) => c.get('rl')))
    assert.ok(tokens[0] && tokens.every((t) => t === tokens[0]), 'the same token on every node')
    const st = await cli(['status', '--json', 'rl'], { env: { LOCKDOG_NODES: nodes, REDIS_URL: '' } }).exited
    assert.equal(st.code, 1, st.stderr)
    assert.equal(JSON.parse(st.stdout).held, true)
    // Another exec on the same nodes cannot take it.
    const nb = await cli(['exec', '-n', '--nodes', nodes, '-k', 'rl', '--', 'true']).exited
    assert.equal(nb.code, 75, nb.stderr)
    fs.writeFileSync(marker, '')
    assert.equal((await run.exited).code, 0)
    assert.deepEqual(await Promise.all(clients.map((c) => c.exists('rl'))), [0, 0, 0])

    // One node down: still a quorum. Two down: 69.
    await extra[0].kill()
    const one = await cli(['exec', '--nodes', nodes, '-k', 'rl', '--', 'sh', '-c', 'exit 7']).exited
    assert.equal(one.code, 7, one.stderr)
    await extra[1].kill()
    const two = await cli(['exec', '--nodes', nodes, '-k', 'rl', '--', 'sh', '-c', 'exit 7']).exited
    assert.equal(two.code, 69, two.stderr)
    assert.match(two.stderr, /nodes agreed/)
    const rel = await cli(['release', '--force', '--json', '--nodes', nodes, 'rl']).exited
    assert.equal(rel.code, 69, rel.stderr)
    assert.match(rel.stderr, /forced release of "rl" reached 1 of 3 nodes, 2 needed/)
    assert.equal(rel.stdout, '')
  } finally {
    for (const c of clients) c.disconnect()
    for (const s of extra) await s.stop()
  }
})

const haveOpenssl = spawnSync('openssl', ['version']).status === 0

test('TLS: rediss:// with --tls-ca, client certificates with --tls-cert/--tls-key', { skip: (!haveOpenssl && 'needs openssl') || (!require('../scripts/local-redis').serverSupportsTls() && 'the server was built without TLS') }, async () => {
  const dir = fs.mkdtempSync(path.join(tmp, 'tls-'))
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=lockdog cli test CA')
  for (const name of ['server', 'client']) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`)
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', 'ext.cnf')
  }
  const f = (name) => path.join(dir, name)
  const tlsPort = await freePort()
  const secure = await startRedis(['--tls-port', String(tlsPort), '--tls-cert-file', f('server.crt'), '--tls-key-file', f('server.key'),
    '--tls-ca-cert-file', f('ca.crt'), '--tls-auth-clients', 'optional'])
  const mtlsPort = await freePort()
  const mutual = await startRedis(['--tls-port', String(mtlsPort), '--tls-cert-file', f('server.crt'), '--tls-key-file', f('server.key'),
    '--tls-ca-cert-file', f('ca.crt'), '--tls-auth-clients', 'yes'])
  try {
    const url = `rediss://127.0.0.1:${tlsPort}`
    const ok = await cli(['exec', '--url', url, '--tls-ca', f('ca.crt'), '-k', 'tls', '--', 'sh', '-c', 'exit 0']).exited
    assert.equal(ok.code, 0, ok.stderr)
    const untrusted = await cli(['status', '--url', url, '--connect-timeout', '1s', 'tls']).exited
    assert.equal(untrusted.code, 69, untrusted.stderr)
    const murl = `rediss://127.0.0.1:${mtlsPort}`
    const noCert = await cli(['status', '--url', murl, '--tls-ca', f('ca.crt'), '--connect-timeout', '1s', 'tls']).exited
    assert.equal(noCert.code, 69, noCert.stderr)
    const withCert = await cli(['status', '--json', '--url', murl, '--tls-ca', f('ca.crt'), '--tls-cert', f('client.crt'), '--tls-key', f('client.key'), 'tls']).exited
    assert.equal(withCert.code, 0, withCert.stderr)
    assert.equal(JSON.parse(withCert.stdout).held, false)
  } finally {
    await secure.stop()
    await mutual.stop()
  }
})

test('durations: a bare number is seconds (fractions allowed), units ms/s/m/h', async () => {
  const marker = file('marker')
  const run = cli(['exec', '--ttl', '2.5', '-k', 'units', '--', ...holdArgs(marker)])
  await run.line((l) => l.ready)
  const pttl = await redis.pttl('units')
  assert.ok(pttl > 1500 && pttl <= 2500, `--ttl 2.5 is 2.5 s: pttl ${pttl}`)
  fs.writeFileSync(marker, '')
  assert.equal((await run.exited).code, 0)

  const holder = new LockClient({ url: server.url })
  const lock = await holder.acquire('units:busy')
  try {
    const w = await cli(['exec', '-w', '0.4', '-k', 'units:busy', '--', 'true']).exited
    assert.equal(w.code, 75, w.stderr)
    assert.ok(w.ms >= 400, `-w 0.4 is 400 ms: gave up after ${Math.round(w.ms)} ms`)
    assert.match(w.stderr, /after 400 ms/)
  } finally {
    await lock.release()
    await holder.close()
  }
})

test('a lease too short to use exits 78, not 75 (nobody else holds the key)', async () => {
  const { FaultProxy } = require('./faults/proxy')
  const proxy = await new FaultProxy(server.port).start()
  try {
    proxy.setLatency(650, 'down')
    const ran = file('ran')
    const r = await cli(['exec', '--ttl', '500ms', '--url', proxy.url, '-k', 'short:lease', '--', 'touch', ran]).exited
    assert.equal(r.code, 78, r.stderr)
    assert.match(r.stderr, /lease is too short to use/)
    assert.equal(fs.existsSync(ran), false, 'the command never ran')
  } finally {
    await proxy.close()
  }
  await waitFor(async () => (await redis.exists('short:lease')) === 0, { what: 'the late key to expire' })
})

test('help: per command, every line under 80 columns', async () => {
  for (const args of [['--help'], ['exec', '--help'], ['status', '-h'], ['release', '--help'], ['help']]) {
    const r = await cli(args).exited
    assert.equal(r.code, 0, r.stderr)
    for (const line of r.stdout.split('\n')) assert.ok(line.length < 80, `${args.join(' ')}: ${line.length} columns: ${line}`)
  }
  const exec = (await cli(['exec', '--help']).exited).stdout
  for (const word of ['--ttl', '--wait', '--on-lost', '--url', 'seconds', '78', '75']) assert.ok(exec.includes(word), `exec help mentions ${word}`)
  assert.ok(!exec.includes('--force'), 'exec help is about exec')
  const status = (await cli(['status', '--help']).exited).stdout
  assert.ok(status.includes('--json') && !status.includes('--ttl'), status)
})

/** Runs `lockdog ...args` on a pseudo-terminal, as the terminal's foreground job. */
function onTerminal(args) {
  const line = [NODE, BIN, ...args].map((a) => `'${a}'`).join(' ')
  // `exec`: no shell stays in between (dash would itself die of a ^C).
  const term = spawn('script', ['-q', '-e', '-c', `exec ${line}`, '/dev/null'], {
    env: { ...process.env, REDIS_URL: server.url },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const run = { term, out: '' }
  term.stdout.on('data', (d) => { run.out += d })
  run.exited = new Promise((resolve) => term.on('close', (code) => resolve(code)))
  run.cliPid = async () => {
    const ready = await waitFor(() => /\{"ready":true,"pid":(\d+)/.exec(run.out), { what: 'the command on the pty' })
    const stat = fs.readFileSync(`/proc/${ready[1]}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  }
  return run
}

test('on a terminal, signals sent to the CLI by PID reach the command (SIGINT, SIGQUIT, SIGHUP, SIGTERM)', { skip: !haveScript && 'needs script(1) for a pty' }, async () => {
  for (const [sig, code] of [['SIGINT', 43], ['SIGQUIT', 46], ['SIGHUP', 44], ['SIGTERM', 42]]) {
    const run = onTerminal(['exec', '-k', 'tty:pid', '--', ...holdArgs(file('never'), '--trap', `${sig}:${code}`)])
    try {
      process.kill(await run.cliPid(), sig)
      assert.equal(await within(run.exited, 10000), code, `${sig}: ${run.out}`)
      assert.equal(run.out.match(new RegExp(`\\{"signal":"${sig}"\\}`, 'g')).length, 1, run.out)
      assert.equal(await redis.exists('tty:pid'), 0)
    } finally {
      if (run.term.exitCode === null) run.term.kill('SIGKILL')
    }
  }
})

function within(p, ms) {
  let timer
  return Promise.race([p, new Promise((resolve) => { timer = setTimeout(() => resolve('timed out'), ms) })]).finally(() => clearTimeout(timer))
}
