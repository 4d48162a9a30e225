'use strict'

// `lockdog exec`: take the lock, run COMMAND while the watchdog renews it,
// forward signals, release, and exit with COMMAND's status (or a lock status).

const fs = require('node:fs')
const { spawn } = require('node:child_process')
const { signals: SIGNALS } = require('node:os').constants
const { EXIT, usage, say, exit, usageExit, quote, failure, makeClient, closeQuietly, UNAVAILABLE } = require('./common')
const { MAX_MS, DEFAULT_TTL_MS } = require('../../binding.js')

/** Signals lockdog forwards to the command (and that interrupt waiting for the lock). */
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2']
/** Signals a terminal sends to its whole foreground process group (the command included). */
const FROM_TERMINAL = ['SIGINT', 'SIGQUIT', 'SIGHUP']
const ON_LOST = ['term', 'kill', 'ignore']
/** How long a signal may wait for the sentinel's word that the terminal sent it to the group. */
const SENTINEL_WAIT_MS = 300

/** True when this process has a controlling terminal (so a terminal may signal its group). */
function hasTerminal() {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(f[4]) !== 0 // tty_nr
  } catch {
    return false
  }
}

// The sentinel: a small process in our process group that reports each terminal
// signal it receives. A terminal delivers Ctrl-C (and Ctrl-\, hangup) to every
// process of its foreground group at once, the command included; a signal sent
// to lockdog by PID reaches lockdog alone. So a signal the sentinel also got
// came from the terminal and already reached the command: it is not forwarded
// again. Every other signal is. The sentinel exits when its stdin (our pipe) closes.
const SENTINEL = `
for (const s of ${JSON.stringify(FROM_TERMINAL)}) process.on(s, () => process.stdout.write(s + '\\n'))
process.stdin.on('end', () => process.exit(0)).on('error', () => process.exit(0)).resume()
process.stdout.write('ready\\n')
`

function startSentinel() {
  return new Promise((resolve) => {
    let child
    try {
      child = spawn(process.execPath, ['-e', SENTINEL], { stdio: ['pipe', 'pipe', 'ignore'] })
    } catch {
      return resolve(null)
    }
    // Reports not yet matched by a signal of ours, as arrival times: a stale one
    // (the kernel may merge two quick signals for one process and not the other)
    // must not swallow a later signal sent by PID.
    const seen = Object.fromEntries(FROM_TERMINAL.map((s) => [s, []]))
    const waiters = []
    let ready = false
    let rest = ''
    const sentinel = {
      /** Resolves true if the terminal sent `sig` to the group (the sentinel got it too). */
      claim(sig) {
        const fresh = seen[sig].filter((t) => performance.now() - t < 1000)
        seen[sig] = fresh
        if (fresh.length > 0) {
          fresh.shift()
          return Promise.resolve(true)
        }
        return new Promise((done) => {
          const w = { sig, done }
          w.timer = setTimeout(() => {
            waiters.splice(waiters.indexOf(w), 1)
            done(false)
          }, SENTINEL_WAIT_MS)
          waiters.push(w)
        })
      },
      stop() {
        try {
          child.stdin.end()
          child.kill('SIGKILL')
        } catch {}
      },
    }
    child.on('error', () => resolve(null))
    child.on('exit', () => { if (!ready) resolve(null) })
    child.stdin.on('error', () => {})
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (d) => {
      rest += d
      let i
      while ((i = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, i)
        rest = rest.slice(i + 1)
        if (line === 'ready') {
          ready = true
          resolve(sentinel)
        } else if (line in seen) {
          const w = waiters.find((x) => x.sig === line)
          if (w) {
            waiters.splice(waiters.indexOf(w), 1)
            clearTimeout(w.timer)
            w.done(true)
          } else seen[line].push(performance.now())
        }
      }
    })
  })
}

function describeOutcome(o) {
  return o.signal ? `was killed by ${o.signal}` : `exited with status ${o.code}`
}

/** ERR_LOCK_TIMEOUT without another owner: the lease ran out before the lock was taken. */
const tooLate = (e) => e && e.code === 'ERR_LOCK_TIMEOUT' && /too late/.test(e.message)

async function exec(opts, command) {
  const keys = opts.key ?? []
  if (keys.length === 0) throw usage('exec: missing the lock key (--key KEY)')
  let argv
  if (opts.command !== undefined) {
    if (command && command.length) throw usage('exec: give either -c STRING or COMMAND ARG..., not both')
    if (opts.shell) throw usage('exec: --shell and -c both mean /bin/sh -c; give one')
    argv = ['/bin/sh', '-c', opts.command]
  } else {
    if (!command || command.length === 0) throw usage('exec: missing the command to run (lockdog exec --key KEY -- COMMAND ARG...)')
    argv = opts.shell ? ['/bin/sh', '-c', command.join(' ')] : command
  }
  if (opts.nonblock && opts.wait !== undefined) throw usage('exec: give --nonblock or --wait, not both')
  const onLost = opts['on-lost'] ?? 'term'
  if (!ON_LOST.includes(onLost)) throw usage(`exec: --on-lost must be one of ${ON_LOST.join(', ')}, not '${onLost}'`)
  if (opts['kill-after'] !== undefined && onLost !== 'term') throw usage('exec: --kill-after goes with --on-lost=term')
  const conflictCode = opts['conflict-exit-code'] ?? EXIT.TEMPFAIL
  const lostCode = opts['lost-exit-code'] ?? EXIT.LOST
  const verbose = opts.verbose ? say : () => {}
  const label = keys.map(quote).join(', ')

  const base = {}
  if (opts.ttl !== undefined) base.ttl = opts.ttl
  if (opts['retry-delay'] !== undefined) {
    base.retryDelay = opts['retry-delay']
    base.retryJitter = opts['retry-delay']
  }
  if (opts['max-hold'] !== undefined) base.maxHold = opts['max-hold']

  const locks = makeClient(opts, opts.fencing ? { fencing: true } : {})

  // Signals: while waiting they abort the wait; while COMMAND runs they are forwarded
  // (in the order they came); while releasing they are held back (the release is
  // bounded by --command-timeout).
  let phase = 'acquire'
  let interrupted = null
  let child = null
  let sentinel = null
  let forwarding = Promise.resolve()
  const waiting = new AbortController()
  const forward = (sig) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    verbose(`forwarding ${sig} to the command (pid ${child.pid})`)
    try {
      child.kill(sig)
    } catch {}
  }
  const onSignal = (sig) => {
    if (phase === 'acquire') {
      if (!interrupted) {
        interrupted = sig
        waiting.abort(new Error(`interrupted by ${sig}`))
      }
    } else if (phase === 'child') {
      forwarding = forwarding.then(async () => {
        if (sentinel && FROM_TERMINAL.includes(sig) && (await sentinel.claim(sig))) {
          verbose(`${sig} came from the terminal, which sent it to the command too`)
          return
        }
        forward(sig)
      })
    }
  }
  for (const sig of FORWARDED) process.on(sig, onSignal)

  const gaveUp = (why, code = conflictCode) => {
    say(why)
    return closeQuietly(locks).then(() => exit(code))
  }

  // --- acquire ---
  const t0 = performance.now()
  let lock = null
  try {
    lock = await acquire()
  } catch (e) {
    if (interrupted) {
      await closeQuietly(locks)
      return exit(128 + SIGNALS[interrupted])
    }
    if (tooLate(e)) {
      return gaveUp(`lock ${label}: the lease is too short to use (--ttl ${base.ttl ?? DEFAULT_TTL_MS} ms): ${e.message}; raise --ttl`, EXIT.CONFIG)
    }
    if (e && (e.code === 'ERR_LOCK_TAKEN' || e.code === 'ERR_LOCK_TIMEOUT')) {
      const left = e.remainingMs != null ? ` (${e.remainingMs} ms left on its lease)` : ''
      if (e.code === 'ERR_LOCK_TAKEN') return gaveUp(`lock ${label} is held by another owner${left}; not waiting (--nonblock)`)
      if (opts.wait !== undefined) {
        return gaveUp(`gave up waiting for lock ${label} after ${opts.wait} ms (--wait): still held by another owner${left}`)
      }
      return gaveUp(`lock ${label}: ${e.message}`)
    }
    await closeQuietly(locks)
    const [code, message] = failure(e)
    if (code === EXIT.USAGE) return usageExit(message, 'exec')
    if (code === EXIT.UNAVAILABLE && opts.wait !== undefined && /^waitTimeout of \d+ ms passed: /.test(message)) {
      say(`gave up waiting for lock ${label} after ${opts.wait} ms (--wait): ${message.replace(/^waitTimeout of \d+ ms passed: /, '')}`)
      return exit(code)
    }
    say(code === EXIT.UNAVAILABLE ? `cannot take lock ${label}: ${message}` : message)
    return exit(code)
  }

  async function acquire() {
    const signal = waiting.signal
    try {
      return await locks.acquire(keys, { ...base, retryCount: 0, signal })
    } catch (e) {
      if (!e || opts.nonblock || opts.wait === 0) throw e
      // With --wait, an outage (Redis unreachable, restarting, failing over) is
      // waited out like a held lock (an error reply that would come back the
      // same fails the next attempt at once); without it, only a held lock is.
      const outage = opts.wait !== undefined && UNAVAILABLE.has(e.code)
      if (e.code !== 'ERR_LOCK_TAKEN' && !outage) throw e
      if (outage) {
        verbose(`waiting for Redis (${e.message})`)
      } else {
        const left = e.remainingMs != null ? `, ${e.remainingMs} ms left on its lease` : ''
        verbose(`waiting for lock ${label} (held by another owner${left})`)
      }
    }
    const deadline = opts.wait === undefined ? Infinity : t0 + opts.wait
    for (;;) {
      const started = performance.now()
      const waitTimeout = Math.min(MAX_MS, Math.max(0, Math.ceil(deadline - started)))
      try {
        return await locks.acquire(keys, { ...base, waitTimeout, signal })
      } catch (e) {
        // "Forever" is a chain of the longest waits the library takes.
        const spent = performance.now() - started
        if (deadline === Infinity && e && e.code === 'ERR_LOCK_TIMEOUT' && !tooLate(e) && spent >= MAX_MS - 1000) continue
        throw e
      }
    }
  }

  const finish = async () => {
    phase = 'release'
    if (sentinel) sentinel.stop()
    let released = null
    try {
      released = await lock.release()
      verbose(released ? `released lock ${label}` : `lock ${label} was no longer ours at release`)
    } catch (e) {
      say(`could not release lock ${label} (${e.message}); it expires within its ttl of ${lock.ttl} ms`)
    }
    await closeQuietly(locks)
    return released
  }

  verbose(
    `acquired lock ${label} (ttl ${lock.ttl} ms${lock.fence != null ? `, fence ${lock.fence}` : ''}) after ` +
      `${lock.attempts} attempt(s), ${Math.round(performance.now() - t0)} ms`,
  )
  if (interrupted) {
    await finish()
    return exit(128 + SIGNALS[interrupted])
  }
  if (hasTerminal()) sentinel = await startSentinel()
  if (interrupted) {
    await finish()
    return exit(128 + SIGNALS[interrupted])
  }
  const lockSignal = lock.signal
  if (lockSignal.aborted) {
    say(`lost lock ${label} before the command started: ${lockSignal.reason && lockSignal.reason.message}`)
    await finish()
    return exit(lostCode)
  }

  // --- run ---
  const env = { ...process.env, LOCKDOG_KEY: lock.key }
  if (lock.fence != null) env.LOCKDOG_FENCE = String(lock.fence)
  else delete env.LOCKDOG_FENCE
  let outcome
  let lost = null
  let killTimer = null
  try {
    phase = 'child'
    child = spawn(argv[0], argv.slice(1), { stdio: 'inherit', env })
    outcome = await new Promise((resolve) => {
      child.on('error', (err) => {
        // Only a failed spawn ends the run; a failed kill() of a live child does not.
        if (child.pid === undefined) resolve({ error: err })
      })
      child.once('exit', (code, signal) => resolve({ code, signal }))
      const onLostLock = () => {
        if (phase !== 'child' || child.exitCode !== null || child.signalCode !== null) return
        lost = lockSignal.reason
        say(`LOST lock ${label} while the command was running: ${lost && lost.message}`)
        if (onLost === 'term') {
          const killAfter = opts['kill-after']
          say(`sending SIGTERM to the command (pid ${child.pid})${killAfter !== undefined ? `, SIGKILL in ${killAfter} ms` : ''}`)
          child.kill('SIGTERM')
          if (killAfter !== undefined) {
            killTimer = setTimeout(() => {
              say(`the command is still running; sending SIGKILL (pid ${child.pid})`)
              child.kill('SIGKILL')
            }, killAfter)
          }
        } else if (onLost === 'kill') {
          say(`sending SIGKILL to the command (pid ${child.pid})`)
          child.kill('SIGKILL')
        } else {
          say('--on-lost=ignore: the command runs on WITHOUT the lock')
        }
      }
      if (child.pid !== undefined) lockSignal.addEventListener('abort', onLostLock, { once: true })
    })
  } catch (e) {
    outcome = { error: e }
  }
  clearTimeout(killTimer)
  const released = await finish()

  let code
  if (outcome.error) {
    const err = outcome.error
    const name = argv[0]
    if (err.code === 'ENOENT') {
      say(`${name}: command not found`)
      code = EXIT.NOT_FOUND
    } else if (err.code === 'EACCES' || err.code === 'EISDIR' || err.code === 'ENOEXEC') {
      say(`${name}: cannot execute: ${err.message}`)
      code = EXIT.CANNOT_EXECUTE
    } else {
      say(`${name}: cannot start: ${err.message}`)
      code = EXIT.OSERR
    }
  } else {
    code = outcome.signal ? 128 + (SIGNALS[outcome.signal] ?? 0) : outcome.code
    if (!lost && released === false) {
      lost = true
      say(`lock ${label} was gone when the command ended (expired, force-released or taken over): the command may have run without it`)
    }
    if (lost) {
      say(`the command ${describeOutcome(outcome)} after losing the lock; exiting with ${lostCode}`)
      code = lostCode
    }
  }
  return exit(code)
}

module.exports = { exec }
