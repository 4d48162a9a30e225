'use strict'

// What every lockdog command shares: exit codes, messages, the client built
// from the connection options, and how a library error becomes an exit code.

const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')

/** Exit codes (sysexits.h where one fits). exec passes the command's own status through. */
const EXIT = {
  OK: 0,
  HELD: 1, // status: a key is held
  USAGE: 64, // EX_USAGE: bad arguments
  UNAVAILABLE: 69, // EX_UNAVAILABLE: Redis unreachable, quorum not reached, error reply
  SOFTWARE: 70, // EX_SOFTWARE: an internal error in lockdog
  OSERR: 71, // EX_OSERR: the command could not be started (other than 126/127)
  TEMPFAIL: 75, // EX_TEMPFAIL: the lock is held by another owner (--nonblock, --wait ran out)
  CONFIG: 78, // EX_CONFIG: the lease (--ttl) is too short to use: the lock came too late to leave validity
  LOST: 79, // the lock was lost while the command ran
  CANNOT_EXECUTE: 126, // as shells: found but not executable
  NOT_FOUND: 127, // as shells: command not found
}

class UsageError extends Error {}
const usage = (message) => new UsageError(message)

function say(message) {
  process.stderr.write(`lockdog: ${message}\n`)
}

function exit(code) {
  process.exit(code)
}

function usageExit(message, sub) {
  say(message)
  process.stderr.write(`Try 'lockdog ${sub ? `${sub} ` : ''}--help' for more information.\n`)
  exit(EXIT.USAGE)
}

const quote = (key) => JSON.stringify(key)

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

function nodeList(raw, source) {
  const list = raw.split(',').map((s) => s.trim()).filter(Boolean)
  if (list.length === 0) throw usage(`${source}: expected comma-separated Redis URLs`)
  return list
}

/** The `sentinel` option from `raw` (comma-separated URLs) and the master's name. */
function sentinelOption(raw, source, opts) {
  const name = opts['sentinel-name'] ?? process.env.LOCKDOG_SENTINEL_NAME
  if (!name) throw usage(`${source} needs --sentinel-name NAME (or LOCKDOG_SENTINEL_NAME): the name the sentinels monitor the master under`)
  return { sentinels: nodeList(raw, source), name }
}

/** The library's option names in its messages, and the flags that set them. */
const FLAG_OF = [
  [/['"](options\.)?tls\.ca['"]/, '--tls-ca'],
  [/['"](options\.)?tls\.cert['"]/, '--tls-cert'],
  [/['"](options\.)?tls\.key['"]/, '--tls-key'],
  [/['"](options\.)?keyPrefix['"]/, '--prefix'],
  [/['"](options\.)?connectTimeout['"]/, '--connect-timeout'],
  [/['"](options\.)?commandTimeout['"]/, '--command-timeout'],
]

/** A LockClient from the connection options (--url, --nodes, --sentinel, $REDIS_URL, $LOCKDOG_NODES, $LOCKDOG_SENTINELS, TLS files). */
function makeClient(opts, extra = {}) {
  const { LockClient } = require(ROOT)
  const { URL_ENV } = require(path.join(ROOT, 'binding.js'))
  const o = { ...extra }
  let source
  if (opts.url !== undefined && opts.nodes !== undefined) throw usage('give --url or --nodes, not both')
  if (opts.sentinel !== undefined && (opts.url !== undefined || opts.nodes !== undefined)) {
    throw usage('give one of --url, --nodes or --sentinel')
  }
  if (opts.sentinel !== undefined) {
    o.sentinel = sentinelOption(opts.sentinel, '--sentinel', opts)
    source = '--sentinel'
  } else if (opts.nodes !== undefined) {
    o.nodes = nodeList(opts.nodes, '--nodes')
    source = '--nodes'
  } else if (opts.url !== undefined) {
    o.url = opts.url
    source = '--url'
  } else if (process.env.LOCKDOG_NODES) {
    o.nodes = nodeList(process.env.LOCKDOG_NODES, 'LOCKDOG_NODES')
    source = 'LOCKDOG_NODES'
  } else if (process.env.LOCKDOG_SENTINELS) {
    o.sentinel = sentinelOption(process.env.LOCKDOG_SENTINELS, 'LOCKDOG_SENTINELS', opts)
    source = 'LOCKDOG_SENTINELS'
  } else if (process.env[URL_ENV]) {
    source = URL_ENV // the client falls back to it (else to its default URL) by itself
  }
  if (opts['sentinel-name'] !== undefined && o.sentinel === undefined) {
    throw usage(`--sentinel-name goes with --sentinel URL,URL (or LOCKDOG_SENTINELS)${source ? `; the lock nodes here come from ${source}` : ''}`)
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
    // The library's messages name the option, never the URL or its password:
    // named here by the flag (or variable) it came from.
    if (isArgError(e)) {
      const flag = FLAG_OF.find(([option]) => option.test(e.message))
      if (flag) {
        const file = flag[1].startsWith('--tls-') ? ` ${opts[flag[1].slice(2)]}` : ''
        throw usage(`${flag[1]}${file}: ${e.message}`)
      }
      throw usage(source ? `${source}: ${e.message}` : e.message)
    }
    throw e
  }
}

/** close(), bounded: the process is about to exit anyway. */
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

module.exports = { ROOT, EXIT, UsageError, usage, say, exit, usageExit, quote, failure, makeClient, closeQuietly, UNAVAILABLE }
