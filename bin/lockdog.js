#!/usr/bin/env node
'use strict'

// lockdog: a distributed flock(1) on Redis. `lockdog exec` runs a command while
// holding a lock (renewed by the native watchdog), `lockdog status` inspects a
// lock, `lockdog release --force` deletes one. Full reference: docs/cli.md.

const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { signals: SIGNALS } = require('node:os').constants

const ROOT = path.join(__dirname, '..')

/** Exit codes (sysexits.h where one fits). The command's own status passes through. */
const EXIT = {
  OK: 0,
  HELD: 1, // status: a key is held
  USAGE: 64, // EX_USAGE: bad arguments
  UNAVAILABLE: 69, // EX_UNAVAILABLE: Redis unreachable, quorum not reached, error reply
  SOFTWARE: 70, // EX_SOFTWARE: an internal error in lockdog
  OSERR: 71, // EX_OSERR: the command could not be started (other than 126/127)
  TEMPFAIL: 75, // EX_TEMPFAIL: the lock is held by another owner (--nonblock, --wait ran out)
  LOST: 79, // the lock was lost while the command ran
  CANNOT_EXECUTE: 126, // as shells: found but not executable
  NOT_FOUND: 127, // as shells: command not found
}

const MAX_MS = 2147483647
/** Signals lockdog forwards to the command (and that interrupt waiting for the lock). */
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2']
const ON_LOST = ['term', 'kill', 'ignore']

const HELP = `Usage:
  lockdog exec [options] --key KEY [--] COMMAND [ARG...]
  lockdog exec [options] KEY [--] COMMAND [ARG...]
  lockdog exec [options] --key KEY -c 'SHELL COMMAND'
  lockdog status [--json] KEY...
  lockdog release --force [--json] KEY...

A Redis distributed lock from the command line: a distributed flock(1).

exec     Takes the lock, runs COMMAND (no shell, stdio inherited) while the watchdog
         renews the lock every ttl/3, and releases it when COMMAND exits. COMMAND's
         exit status is passed through (128+N if it died of signal N). SIGINT,
         SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to it. Waits
         for the lock as long as it takes, unless --wait or --nonblock.
status   Prints whether each KEY is held, for how long, by whom (masked token) and
         its fence counter. Exit 0 if every KEY is free, 1 if any is held.
release  Deletes each KEY whoever holds it. UNSAFE (the holder is not told and may
         still be working), so it refuses without --force.

Connection (every command):
      --url URL               Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379)
      --nodes URL,URL,URL     independent Redis masters: Redlock, quorum N/2+1
                              (default: $LOCKDOG_NODES)
      --prefix PREFIX         prepended to every key in Redis
      --connect-timeout MS    per node (default 2000)
      --command-timeout MS    per reply (default 1000)
      --tls-ca FILE           rediss://: trust this CA (PEM) instead of the system's store
      --tls-cert FILE         rediss://: client certificate (PEM), with --tls-key FILE

exec options:
  -k, --key KEY               the lock (repeat for one lock over several keys)
      --ttl MS                lease length; renewed every ttl/3 (default 30000)
  -w, --wait MS               give up after waiting MS for the lock (default: wait forever)
  -n, --nonblock              fail at once if the lock is held (same as --wait 0)
      --retry-delay MS        pause between attempts while waiting (default 100,
                              plus up to as much again at random)
      --max-hold MS           stop renewing after MS: the lock lapses and counts as lost
  -c, --command STRING        run STRING with /bin/sh -c instead of COMMAND ARG...
      --shell                 run "COMMAND ARG..." (joined with spaces) with /bin/sh -c
      --on-lost ACTION        if the lock is lost while COMMAND runs: term (send SIGTERM,
                              default), kill (send SIGKILL) or ignore (let it run on)
      --kill-after MS         with --on-lost=term: SIGKILL if still running MS later
      --fencing               hand out a fencing token, exported as LOCKDOG_FENCE
  -E, --conflict-exit-code N  exit status when the lock is held by another (default 75)
      --lost-exit-code N      exit status when the lock was lost (default 79)
  -v, --verbose               report waiting, acquiring and releasing on stderr

status / release options:
      --json                  one JSON object per key on stdout
  -f, --force                 release: really delete the key(s)

  -h, --help                  this help
  -V, --version               lockdog's version

MS is milliseconds, or a number with a unit: 500ms, 30s, 5m, 1h.
COMMAND gets LOCKDOG_KEY (the first key) and, with --fencing, LOCKDOG_FENCE.

Exit status:
  0-255  exec: COMMAND's exit status (128+N if it died of signal N)
  0      status: every key free; release: done (whether or not a key existed)
  1      status: a key is held
  64     usage error (bad option, missing key or command, invalid URL or duration)
  69     Redis unreachable, Redlock quorum not reached, or Redis answered an error
  70     internal error
  71     COMMAND could not be started (126: not executable, 127: not found)
  75     exec: the lock is held by another owner (--nonblock, or --wait ran out)
  79     exec: the lock was lost while COMMAND ran (COMMAND got SIGTERM unless
         --on-lost says otherwise); also when the key was gone at release

If lockdog itself is killed with SIGKILL, the key expires within --ttl; COMMAND is
not killed with it. Passwords in --url/--nodes are visible to ps(1): prefer
REDIS_URL / LOCKDOG_NODES. lockdog never prints URLs, only host:port.
`

// --- arguments ---------------------------------------------------------------

class UsageError extends Error {}
const usage = (message) => new UsageError(message)

const OPTIONS = {
  help: { short: 'h' },
  version: { short: 'V' },
  url: { value: 'string', for: ['exec', 'status', 'release'] },
  nodes: { value: 'string', for: ['exec', 'status', 'release'] },
  prefix: { value: 'string', for: ['exec', 'status', 'release'] },
  'connect-timeout': { value: 'duration', min: 1, for: ['exec', 'status', 'release'] },
  'command-timeout': { value: 'duration', min: 1, for: ['exec', 'status', 'release'] },
  'tls-ca': { value: 'string', for: ['exec', 'status', 'release'] },
  'tls-cert': { value: 'string', for: ['exec', 'status', 'release'] },
  'tls-key': { value: 'string', for: ['exec', 'status', 'release'] },
  key: { short: 'k', value: 'string', multiple: true, for: ['exec', 'status', 'release'] },
  ttl: { value: 'duration', min: 1, for: ['exec'] },
  wait: { short: 'w', value: 'duration', min: 0, for: ['exec'] },
  nonblock: { short: 'n', for: ['exec'] },
  'retry-delay': { value: 'duration', min: 0, for: ['exec'] },
  'max-hold': { value: 'duration', min: 1, for: ['exec'] },
  command: { short: 'c', value: 'string', for: ['exec'] },
  shell: { for: ['exec'] },
  'on-lost': { value: 'string', for: ['exec'] },
  'kill-after': { value: 'duration', min: 0, for: ['exec'] },
  fencing: { for: ['exec'] },
  'conflict-exit-code': { short: 'E', value: 'code', for: ['exec'] },
  'lost-exit-code': { value: 'code', for: ['exec'] },
  verbose: { short: 'v', for: ['exec'] },
  json: { for: ['status', 'release'] },
  force: { short: 'f', for: ['release'] },
}
const SHORT = Object.fromEntries(
  Object.entries(OPTIONS).filter(([, s]) => s.short).map(([name, s]) => [s.short, name]),
)
const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

function duration(name, raw, min) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim())
  const ms = m ? Number(m[1]) * UNITS[m[2] || 'ms'] : NaN
  if (!Number.isInteger(ms)) {
    throw usage(`--${name}: '${raw}' is not a duration (whole milliseconds, or a number with a unit: 500ms, 30s, 5m, 1h)`)
  }
  if (ms < min || ms > MAX_MS) throw usage(`--${name}: ${ms} ms is out of range (${min}..${MAX_MS} ms)`)
  return ms
}

function convert(name, spec, raw) {
  if (spec.value === 'duration') return duration(name, raw, spec.min)
  if (spec.value === 'code') {
    if (!/^\d+$/.test(raw) || Number(raw) > 255) throw usage(`--${name}: '${raw}' is not an exit status (0..255)`)
    return Number(raw)
  }
  return raw
}

function setOption(opts, name, value) {
  if (OPTIONS[name].multiple) (opts[name] ??= []).push(value)
  else opts[name] = value
}

/** Reads the option at argv[i] into opts; returns the index of its last token. */
function readOption(argv, i, opts) {
  const tok = argv[i]
  let name
  let inline
  if (tok.startsWith('--')) {
    const eq = tok.indexOf('=')
    name = eq < 0 ? tok.slice(2) : tok.slice(2, eq)
    if (eq >= 0) inline = tok.slice(eq + 1)
    if (!Object.hasOwn(OPTIONS, name)) throw usage(`unknown option '--${name}'`)
  } else {
    name = SHORT[tok[1]]
    if (!name) throw usage(`unknown option '-${tok[1]}'`)
    if (tok.length > 2) {
      if (OPTIONS[name].value) {
        inline = tok.slice(2)
      } else {
        // Bundled flags: -nv
        for (const c of tok.slice(1)) {
          const n = SHORT[c]
          if (!n) throw usage(`unknown option '-${c}' (in '${tok}')`)
          if (OPTIONS[n].value) throw usage(`option '-${c}' takes a value; give it separately, not in '${tok}'`)
          setOption(opts, n, true)
        }
        return i
      }
    }
  }
  const spec = OPTIONS[name]
  if (!spec.value) {
    if (inline !== undefined) throw usage(`option '--${name}' takes no value`)
    setOption(opts, name, true)
    return i
  }
  if (inline === undefined) {
    if (i + 1 >= argv.length) throw usage(`option '--${name}' needs a value`)
    inline = argv[++i]
  }
  setOption(opts, name, convert(name, spec, inline))
  return i
}

/**
 * `lockdog SUB [options] [operands]`. For exec, options end at `--` or at the first
 * operand after the key, so COMMAND's own options are never read as lockdog's.
 */
function parse(argv) {
  const opts = {}
  let sub = null
  const operands = []
  let command = null
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]
    if (tok === '--') {
      if (sub === 'exec') command = argv.slice(i + 1)
      else operands.push(...argv.slice(i + 1))
      break
    }
    if (tok.length > 1 && tok.startsWith('-')) {
      i = readOption(argv, i, opts)
      continue
    }
    if (sub === null) {
      sub = tok
      continue
    }
    if (sub === 'exec') {
      if (!opts.key) {
        opts.key = [tok]
        continue
      }
      command = argv.slice(i)
      break
    }
    operands.push(tok)
  }
  return { sub, opts, operands, command }
}

function checkOptions(sub, opts) {
  for (const name of Object.keys(opts)) {
    const allowed = OPTIONS[name].for
    if (allowed && !allowed.includes(sub)) throw usage(`option '--${name}' does not apply to '${sub}'`)
  }
}

// --- Redis -------------------------------------------------------------------

function nodeList(raw, source) {
  const list = raw.split(',').map((s) => s.trim()).filter(Boolean)
  if (list.length === 0) throw usage(`${source}: expected comma-separated Redis URLs`)
  return list
}

function makeClient(opts, extra = {}) {
  const { LockClient } = require(ROOT)
  const o = { ...extra }
  let source
  if (opts.url !== undefined && opts.nodes !== undefined) throw usage('give --url or --nodes, not both')
  if (opts.nodes !== undefined) {
    o.nodes = nodeList(opts.nodes, '--nodes')
    source = '--nodes'
  } else if (opts.url !== undefined) {
    o.url = opts.url
    source = '--url'
  } else if (process.env.LOCKDOG_NODES) {
    o.nodes = nodeList(process.env.LOCKDOG_NODES, 'LOCKDOG_NODES')
    source = 'LOCKDOG_NODES'
  } else if (process.env.REDIS_URL) {
    o.url = process.env.REDIS_URL
    source = 'REDIS_URL'
  } else {
    o.url = 'redis://127.0.0.1:6379' // also when REDIS_URL is set but empty
  }
  if (opts.prefix !== undefined) o.keyPrefix = opts.prefix
  if (opts['connect-timeout'] !== undefined) o.connectTimeout = opts['connect-timeout']
  if (opts['command-timeout'] !== undefined) o.commandTimeout = opts['command-timeout']
  if ((opts['tls-cert'] === undefined) !== (opts['tls-key'] === undefined)) throw usage('--tls-cert and --tls-key go together')
  const tls = {}
  for (const [name, field] of [['tls-ca', 'ca'], ['tls-cert', 'cert'], ['tls-key', 'key']]) {
    if (opts[name] === undefined) continue
    try {
      tls[field] = fs.readFileSync(opts[name], 'utf8')
    } catch (e) {
      throw usage(`--${name}: cannot read ${opts[name]}: ${e.code || e.message}`)
    }
  }
  if (Object.keys(tls).length) o.tls = tls
  try {
    return new LockClient(o)
  } catch (e) {
    // The library's messages name the option, never the URL or its password.
    if (isArgError(e)) throw usage(source ? `${source}: ${e.message}` : e.message)
    throw e
  }
}

const isArgError = (e) =>
  e != null && typeof e.code === 'string' && (e.code.startsWith('ERR_INVALID_ARG') || e.code === 'ERR_OUT_OF_RANGE')

const UNAVAILABLE = new Set(['ERR_LOCK_CONNECTION', 'ERR_LOCK_QUORUM', 'ERR_LOCK_REDIS'])

/** Exit status and message for an error from the library (not a conflict). */
function failure(e) {
  if (e instanceof UsageError) return [EXIT.USAGE, e.message]
  if (isArgError(e)) return [EXIT.USAGE, e.message]
  if (e && UNAVAILABLE.has(e.code)) return [EXIT.UNAVAILABLE, e.message]
  return [EXIT.SOFTWARE, `internal error: ${(e && e.stack) || e}`]
}

async function closeQuietly(locks) {
  if (!locks) return
  let timer
  await Promise.race([
    locks.close().catch(() => {}),
    new Promise((r) => {
      timer = setTimeout(r, 3000)
    }),
  ])
  clearTimeout(timer)
}

// --- output --------------------------------------------------------------------

function say(message) {
  process.stderr.write(`lockdog: ${message}\n`)
}

function exit(code) {
  process.exit(code)
}

function usageExit(message) {
  say(message)
  process.stderr.write("Try 'lockdog --help' for more information.\n")
  exit(EXIT.USAGE)
}

const quote = (key) => JSON.stringify(key)

// --- exec ----------------------------------------------------------------------

/** True when SIGINT/SIGQUIT from the terminal already reached our process group (and so the command). */
function terminalSignalsOurGroup() {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // state ppid pgrp session tty_nr tpgid
    const pgrp = Number(f[2])
    const tty = Number(f[4])
    const tpgid = Number(f[5])
    return tty !== 0 && tpgid === pgrp
  } catch {
    return false
  }
}

function describeOutcome(o) {
  return o.signal ? `was killed by ${o.signal}` : `exited with status ${o.code}`
}

async function exec(opts, command) {
  const keys = opts.key ?? []
  if (keys.length === 0) throw usage("exec: missing the lock key (--key KEY)")
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

  // Signals: while waiting they abort the wait; while COMMAND runs they are forwarded;
  // while releasing they are held back (the release is bounded by --command-timeout).
  let phase = 'acquire'
  let interrupted = null
  let child = null
  const waiting = new AbortController()
  const onSignal = (sig) => {
    if (phase === 'acquire') {
      if (!interrupted) {
        interrupted = sig
        waiting.abort(new Error(`interrupted by ${sig}`))
      }
    } else if (phase === 'child') {
      // Ctrl-C / Ctrl-\ on our terminal went to the whole foreground group, COMMAND included.
      if ((sig === 'SIGINT' || sig === 'SIGQUIT') && terminalSignalsOurGroup()) return
      verbose(`forwarding ${sig} to the command (pid ${child.pid})`)
      try {
        child.kill(sig)
      } catch {}
    }
  }
  for (const sig of FORWARDED) process.on(sig, onSignal)

  const gaveUp = (why) => {
    say(why)
    return closeQuietly(locks).then(() => exit(conflictCode))
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
    if (code === EXIT.USAGE) return usageExit(message)
    say(code === EXIT.UNAVAILABLE ? `cannot take lock ${label}: ${message}` : message)
    return exit(code)
  }

  async function acquire() {
    const signal = waiting.signal
    try {
      return await locks.acquire(keys, { ...base, retryCount: 0, signal })
    } catch (e) {
      if (!e || e.code !== 'ERR_LOCK_TAKEN' || opts.nonblock || opts.wait === 0) throw e
      const left = e.remainingMs != null ? `, ${e.remainingMs} ms left on its lease` : ''
      verbose(`waiting for lock ${label} (held by another owner${left})`)
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
        if (deadline === Infinity && e && e.code === 'ERR_LOCK_TIMEOUT' && spent >= MAX_MS - 1000) continue
        throw e
      }
    }
  }

  const finish = async () => {
    phase = 'release'
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

// --- status / release ----------------------------------------------------------------

function operandKeys(sub, opts, operands) {
  const keys = [...(opts.key ?? []), ...operands]
  if (keys.length === 0) throw usage(`${sub}: missing the lock key (lockdog ${sub} KEY...)`)
  for (const k of keys) if (k === '') throw usage(`${sub}: a lock key must not be empty`)
  return keys
}

async function runOnClient(opts, what, fn) {
  const locks = makeClient(opts)
  try {
    return await fn(locks)
  } catch (e) {
    await closeQuietly(locks)
    const [code, message] = failure(e)
    if (code === EXIT.USAGE) return usageExit(message)
    say(code === EXIT.UNAVAILABLE ? `cannot ${what}: ${message}` : message)
    return exit(code)
  } finally {
    await closeQuietly(locks)
  }
}

async function status(opts, operands) {
  const keys = operandKeys('status', opts, operands)
  const results = await runOnClient(opts, `inspect ${keys.map(quote).join(', ')}`, (locks) => Promise.all(keys.map((k) => locks.inspect(k))))
  let out = ''
  for (let i = 0; i < keys.length; i++) {
    const r = results[i]
    if (opts.json) {
      out += `${JSON.stringify({ key: keys[i], held: r.held, remainingMs: r.remainingMs, holder: r.holder, fence: r.fence })}\n`
    } else if (r.held) {
      const parts = [`${r.remainingMs ?? '?'} ms left`, `holder ${r.holder}`]
      if (r.fence != null) parts.push(`fence ${r.fence}`)
      out += `${keys[i]}: held (${parts.join(', ')})\n`
    } else {
      out += `${keys[i]}: free${r.fence != null ? ` (fence ${r.fence})` : ''}\n`
    }
  }
  process.stdout.write(out)
  return exit(results.some((r) => r.held) ? EXIT.HELD : EXIT.OK)
}

async function release(opts, operands) {
  const keys = operandKeys('release', opts, operands)
  if (!opts.force) {
    throw usage(
      `release: refusing to delete ${keys.map(quote).join(', ')} without --force. Forcing a release is unsafe: ` +
        'the holder is not told and may still be working. (Locks taken by `lockdog exec` are released when the command exits.)',
    )
  }
  const out = await runOnClient(opts, `release ${keys.map(quote).join(', ')}`, async (locks) => {
    const total = locks.nodes.length
    let text = ''
    for (const key of keys) {
      const n = await locks.forceRelease(key)
      // forceRelease needs a quorum of answers; confirm that a quorum sees the lock free.
      let after
      try {
        after = await locks.inspect(key)
      } catch (e) {
        if (e && UNAVAILABLE.has(e.code)) {
          e.message = `the key was deleted on ${n} of ${total} node(s), but too few nodes answered to confirm that the lock is free: ${e.message}`
        }
        throw e
      }
      const again = after.held ? ` It is held again, by ${after.holder}.` : ''
      const nodes = `${total} node${total === 1 ? '' : 's'}`
      if (opts.json) text += `${JSON.stringify({ key, deleted: n, nodes: total, held: after.held })}\n`
      else if (n > 0) text += `${key}: force-released (the key existed on ${n} of ${nodes}).${again}\n`
      else text += `${key}: not held (the key existed on none of ${nodes}).${again}\n`
    }
    return text
  })
  process.stdout.write(out)
  return exit(EXIT.OK)
}

// --- main ------------------------------------------------------------------------------

async function main(argv) {
  let parsed
  try {
    parsed = parse(argv)
  } catch (e) {
    if (e instanceof UsageError) return usageExit(e.message)
    throw e
  }
  const { sub, opts, operands, command } = parsed
  if (opts.help || sub === 'help') {
    process.stdout.write(HELP)
    return exit(EXIT.OK)
  }
  if (opts.version) {
    process.stdout.write(`lockdog ${require(path.join(ROOT, 'package.json')).version}\n`)
    return exit(EXIT.OK)
  }
  try {
    if (sub === null) throw usage('missing command: exec, status or release')
    if (!['exec', 'status', 'release'].includes(sub)) throw usage(`unknown command '${sub}' (expected exec, status or release)`)
    checkOptions(sub, opts)
    if (sub === 'exec') return await exec(opts, command)
    if (sub === 'status') return await status(opts, operands)
    return await release(opts, operands)
  } catch (e) {
    const [code, message] = failure(e)
    if (code === EXIT.USAGE) return usageExit(message)
    say(message)
    return exit(code)
  }
}

main(process.argv.slice(2)).catch((e) => {
  say(`internal error: ${(e && e.stack) || e}`)
  process.exit(EXIT.SOFTWARE)
})
