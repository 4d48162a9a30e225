'use strict'

// Command-line arguments: node:util parseArgs for every command, durations in
// seconds unless a unit says otherwise, and one help text per command.

const { parseArgs } = require('node:util')
const { usage } = require('./common')
const { MAX_MS, DEFAULT_URL, URL_ENV } = require('../../binding.js')

/** The shortest lease exec accepts: below it renewals and network latency leave no usable validity. */
const MIN_TTL_MS = 500
const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

const CONNECTION = {
  url: { type: 'string' },
  nodes: { type: 'string' },
  sentinel: { type: 'string' },
  'sentinel-name': { type: 'string' },
  prefix: { type: 'string' },
  'connect-timeout': { type: 'string', duration: { min: 1 } },
  'command-timeout': { type: 'string', duration: { min: 1 } },
  'tls-ca': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
}

const OPTIONS = {
  exec: {
    ...CONNECTION,
    key: { type: 'string', short: 'k', multiple: true },
    ttl: { type: 'string', duration: { min: MIN_TTL_MS } },
    wait: { type: 'string', short: 'w', duration: { min: 0 } },
    nonblock: { type: 'boolean', short: 'n' },
    'retry-delay': { type: 'string', duration: { min: 0 } },
    'max-hold': { type: 'string', duration: { min: 1 } },
    command: { type: 'string', short: 'c' },
    shell: { type: 'boolean' },
    'on-lost': { type: 'string' },
    'kill-after': { type: 'string', duration: { min: 0 } },
    fencing: { type: 'boolean' },
    'conflict-exit-code': { type: 'string', short: 'E', exitCode: true },
    'lost-exit-code': { type: 'string', exitCode: true },
    verbose: { type: 'boolean', short: 'v' },
  },
  status: { ...CONNECTION, key: { type: 'string', short: 'k', multiple: true }, json: { type: 'boolean' } },
  release: {
    ...CONNECTION,
    key: { type: 'string', short: 'k', multiple: true },
    json: { type: 'boolean' },
    force: { type: 'boolean', short: 'f' },
  },
}
const COMMANDS = Object.keys(OPTIONS)

const DURATIONS = 'Durations are seconds (fractions allowed: 0.5), or a number with a unit:\n500ms, 30s, 5m, 1h.'

const CONNECTION_HELP = `Connection:
      --url URL             Redis URL (default: $${URL_ENV},
                            else ${DEFAULT_URL})
      --nodes URL,URL,URL   independent Redis masters: Redlock, quorum
                            N/2+1 (default: $LOCKDOG_NODES)
      --sentinel URL,URL    the master these Redis Sentinels name, followed
                            across failovers (default: $LOCKDOG_SENTINELS)
      --sentinel-name NAME  the name they monitor it under (default:
                            $LOCKDOG_SENTINEL_NAME)
      --prefix PREFIX       prepended to every key in Redis
      --connect-timeout D   per node (default 2s)
      --command-timeout D   per reply (default 1s)
      --tls-ca FILE         rediss://: trust this CA (PEM)
      --tls-cert FILE       rediss://: client certificate (PEM),
      --tls-key FILE        with its key`

const HELP = {
  main: `Usage: lockdog COMMAND [options] ...

A Redis distributed lock from the command line: a distributed flock(1).

Commands:
  exec      run a command while holding a lock
  status    show whether keys are held
  release   delete keys whoever holds them (unsafe; needs --force)

  lockdog exec [options] --key KEY [--] COMMAND [ARG...]
  lockdog status [--json] KEY...
  lockdog release --force [--json] KEY...

  -h, --help      this help ('lockdog COMMAND --help': that command's)
  -V, --version   lockdog's version

Every command connects with --url URL (default: $${URL_ENV}, else
${DEFAULT_URL}) or --nodes URL,URL,URL for Redlock (default:
$LOCKDOG_NODES); see 'lockdog exec --help' for TLS and timeouts.

${DURATIONS}

Exit status:
  0-255  exec: COMMAND's exit status (128+N if it died of signal N)
  0      status: every key free; release: done
  1      status: a key is held
  64     usage error (bad option, missing key or command, bad duration,
         a --ttl under ${MIN_TTL_MS}ms)
  69     Redis unreachable, Redlock quorum not reached, or an error reply
  70     internal error
  71     COMMAND could not be started (126: not executable, 127: not found)
  75     exec: the lock is held by another owner (--nonblock, --wait ran out)
  78     exec: the lease is too short to use: the lock was taken too late to
         leave any validity (raise --ttl)
  79     exec: the lock was lost while COMMAND ran, or was gone at release

Full reference: docs/cli.md.
`,
  exec: `Usage:
  lockdog exec [options] --key KEY [--] COMMAND [ARG...]
  lockdog exec [options] KEY [--] COMMAND [ARG...]
  lockdog exec [options] --key KEY -c 'SHELL COMMAND'

Takes the lock, runs COMMAND (no shell, stdio inherited) while the watchdog
renews the lock every ttl/3, and releases it when COMMAND exits. COMMAND's
exit status is passed through (128+N if it died of signal N). Every SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to lockdog is forwarded
to COMMAND (a terminal's Ctrl-C, which reaches COMMAND itself, only once).
Waits for the lock as long as it takes, unless --wait or --nonblock.

Options:
  -k, --key KEY             the lock (repeat: one lock over several keys)
      --ttl D               lease; renewed every ttl/3 (default 30s,
                            at least ${MIN_TTL_MS}ms)
  -w, --wait D              give up after waiting D (default: forever)
  -n, --nonblock            fail at once if the lock is held (--wait 0)
      --retry-delay D       pause between attempts while waiting (default
                            0.1s, plus up to as much again at random)
      --max-hold D          stop renewing after D: the lock lapses and
                            counts as lost
  -c, --command STRING      run STRING with /bin/sh -c
      --shell               run "COMMAND ARG..." with /bin/sh -c
      --on-lost ACTION      if the lock is lost while COMMAND runs: term
                            (SIGTERM, default), kill (SIGKILL), ignore
      --kill-after D        with --on-lost=term: SIGKILL D later
      --fencing             export a fencing token as LOCKDOG_FENCE
  -E, --conflict-exit-code N  exit status when held by another (75)
      --lost-exit-code N    exit status when the lock was lost (79)
  -v, --verbose             report waiting, acquiring, releasing
  -h, --help                this help

${CONNECTION_HELP}

${DURATIONS}
COMMAND gets LOCKDOG_KEY (the first key) and, with --fencing, LOCKDOG_FENCE.

Exit status: COMMAND's; 64 usage; 69 Redis unavailable; 71/126/127 COMMAND
not started; 75 held by another owner; 78 lease too short to use (the lock
was taken too late); 79 lost while COMMAND ran (or gone at release).
`,
  status: `Usage: lockdog status [options] KEY...

Prints whether each KEY is held, for how long, by whom (masked token) and
its fence counter. Exit 0 if every KEY is free, 1 if any is held.

Options:
  -k, --key KEY             a key (or give keys as operands)
      --json                one JSON object per key on stdout
  -h, --help                this help

${CONNECTION_HELP}

Exit status: 0 all free; 1 a key is held; 64 usage; 69 Redis unavailable.
`,
  release: `Usage: lockdog release --force [options] KEY...

Deletes each KEY whoever holds it. UNSAFE: the holder is not told and may
still be working, so it refuses without --force.

Options:
  -f, --force               really delete the key(s)
  -k, --key KEY             a key (or give keys as operands)
      --json                one JSON object per key on stdout
  -h, --help                this help

${CONNECTION_HELP}

Exit status: 0 done (whether or not a key existed); 64 usage; 69 Redis
unavailable.
`,
}

/** A duration in whole milliseconds: bare numbers are seconds. */
function duration(name, raw, min) {
  if (NEGATIVE.test(raw.trim())) throw usage(`--${name}: ${raw} is negative (a duration is 0 or more)`)
  const m = /^(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)?$/.exec(raw.trim())
  const exact = m ? Number(m[1]) * UNITS[m[2] || 's'] : NaN
  const ms = Math.round(exact)
  if (!Number.isFinite(ms)) {
    throw usage(`--${name}: '${raw}' is not a duration (seconds, or a number with a unit: 500ms, 30s, 5m, 1h)`)
  }
  // Checked before rounding: 0.4999 (499.9 ms) is as short as 499ms.
  if (exact < min) {
    const why = name === 'ttl' ? ': a shorter lease cannot be renewed in time' : ''
    throw usage(`--${name}: ${raw} is too short (at least ${min} ms${why})`)
  }
  if (ms > MAX_MS) throw usage(`--${name}: ${raw} is too long (at most ${MAX_MS} ms)`)
  return ms
}

function exitCode(name, raw) {
  if (!/^\d+$/.test(raw) || Number(raw) > 255) throw usage(`--${name}: '${raw}' is not an exit status (0..255)`)
  return Number(raw)
}

/** parseArgs' own errors, in lockdog's words. */
function parseError(e, sub) {
  const opt = /'([^']+)'/.exec(e.message)
  const name = opt ? opt[1].split(/[ ,]+/).find((s) => s.startsWith('--')) || opt[1] : ''
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return usage(`${sub}: unknown option '${opt ? opt[1] : '?'}'`)
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (/argument missing|ambiguous/.test(e.message)) return usage(`${sub}: option '${name}' needs a value`)
    return usage(`${sub}: option '${name}' takes no value`)
  }
  return usage(`${sub}: ${e.message}`)
}

/**
 * Splits exec's arguments into lockdog's own and COMMAND's: COMMAND starts at
 * `--`, or at the first operand after the key, so COMMAND's own options are
 * never read as lockdog's.
 */
function splitExec(args, spec) {
  const short = Object.fromEntries(Object.entries(spec).filter(([, s]) => s.short).map(([n, s]) => [s.short, n]))
  let haveKey = false
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    if (a === '--') return { own: args.slice(0, i), command: args.slice(i + 1), dashdash: true }
    if (a.startsWith('--')) {
      const name = a.slice(2).split('=')[0]
      if (name === 'key') haveKey = true
      if (!a.includes('=') && spec[name] && spec[name].type === 'string') i++
      continue
    }
    if (a.startsWith('-') && a.length > 1) {
      for (let j = 1; j < a.length; j++) {
        const name = short[a[j]]
        if (!name) break
        if (name === 'key') haveKey = true
        if (spec[name].type === 'string') {
          if (j === a.length - 1) i++
          break
        }
      }
      continue
    }
    if (!haveKey) {
      haveKey = true // flock-style: the first operand is the key
      continue
    }
    return { own: args.slice(0, i), command: args.slice(i), dashdash: false }
  }
  return { own: args, command: [], dashdash: false }
}

const UNIT_ALONE = /^(ms|s|m|h)$/
/** A value that parseArgs would take for an option of its own: `--ttl -1`. */
const NEGATIVE = /^-(\d|\.\d)/

/**
 * `--ttl -1`, `-E -1`: joined into `--ttl=-1` so that the value is checked (and
 * refused for what it is) instead of being read as an option.
 */
function joinNegatives(args, spec) {
  const short = Object.fromEntries(Object.entries(spec).filter(([, s]) => s.short).map(([n, s]) => [s.short, n]))
  const out = []
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    const next = args[i + 1]
    let name = null
    if (/^--[^=]+$/.test(a)) name = a.slice(2)
    else if (/^-[^-]$/.test(a)) name = short[a[1]]
    if (name && spec[name] && spec[name].type === 'string' && next !== undefined && NEGATIVE.test(next)) {
      out.push(`--${name}=${next}`)
      i++
    } else {
      out.push(a)
    }
  }
  return out
}

/** `--ttl 5 s`: a unit given as a separate word would be read as an operand. */
function checkDetachedUnit(tokens, spec, next, sub) {
  const last = tokens[tokens.length - 1]
  if (!last || last.kind !== 'option' || last.inlineValue || !spec[last.name] || !spec[last.name].duration) return
  if (next !== undefined && UNIT_ALONE.test(next)) {
    throw usage(`${sub}: --${last.name} ${last.value} ${next}: write the unit without a space (${last.value}${next})`)
  }
}

/**
 * Parses `lockdog SUB ...`. Returns { sub, opts, operands, command, dashdash }
 * or { help: sub|'main' } or { version: true }. Throws UsageError.
 */
function parse(argv) {
  const [first, ...rest] = argv
  if (first === undefined) throw usage('missing command: exec, status or release')
  if (first === '-h' || first === '--help' || first === 'help') return { help: 'main' }
  if (first === '-V' || first === '--version') return { version: true }
  if (first.startsWith('-')) throw usage(`the command comes first: lockdog exec|status|release [options] (got '${first}')`)
  if (!COMMANDS.includes(first)) throw usage(`unknown command '${first}' (expected exec, status or release)`)
  const sub = first
  const spec = OPTIONS[sub]
  let own = rest
  let command = null
  let dashdash = false
  if (sub === 'exec') ({ own, command, dashdash } = splitExec(rest, spec))
  own = joinNegatives(own, spec)
  let parsed
  try {
    parsed = parseArgs({ args: own, options: spec, allowPositionals: true, strict: true, tokens: true })
  } catch (e) {
    if (e && typeof e.code === 'string' && e.code.startsWith('ERR_PARSE_ARGS')) throw parseError(e, sub)
    throw e
  }
  const { values, positionals, tokens } = parsed
  if (values.help) return { help: sub }
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i].kind === 'positional') checkDetachedUnit(tokens.slice(0, i), spec, tokens[i].value, sub)
  }
  if (sub === 'exec' && command && command.length && !dashdash) checkDetachedUnit(tokens, spec, command[0], sub)
  const opts = {}
  for (const [name, value] of Object.entries(values)) {
    const s = spec[name]
    if (s.duration) opts[name] = duration(name, value, s.duration.min)
    else if (s.exitCode) opts[name] = exitCode(name, value)
    else opts[name] = value
  }
  let operands = positionals
  if (sub === 'exec') {
    if (positionals.length > 1 || (positionals.length === 1 && opts.key)) {
      const extra = positionals.slice(opts.key ? 0 : 1)
      throw usage(`exec: unexpected operand '${extra[0]}' before '--' (the lock key is --key KEY or the first operand)`)
    }
    if (positionals.length === 1) opts.key = [positionals[0]]
    operands = []
  }
  return { sub, opts, operands, command, dashdash }
}

module.exports = { parse, HELP }
