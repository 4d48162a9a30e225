'use strict'

// Starts throwaway redis-server processes on free loopback ports and stops them
// by PID. Used by the demo and the tests; never touches a Redis it did not start.

const { spawn, spawnSync } = require('node:child_process')
const net = require('node:net')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const BIN = process.env.REDIS_SERVER_BIN || 'redis-server'

// The reaper: one small detached process per process that starts servers. It is
// told every server PID and temporary folder over a pipe; when the pipe closes
// (this process exited, crashed on EPIPE, or was killed, even with SIGKILL or
// with its whole process group), it kills what is still listed and removes the
// folders. A normal stop() takes its server off the list first.
const REAPER = `
const fs = require('node:fs')
const live = new Map()
let rest = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (d) => {
  rest += d
  let i
  while ((i = rest.indexOf('\\n')) >= 0) {
    const [op, pid, dir] = rest.slice(0, i).split('\\t')
    rest = rest.slice(i + 1)
    if (op === '+') live.set(pid, dir)
    else live.delete(pid)
  }
})
const reap = () => {
  for (const [pid, dir] of live) {
    try { process.kill(Number(pid), 'SIGCONT'); process.kill(Number(pid), 'SIGKILL') } catch {}
    try { fs.rmSync(dir, { recursive: true, force: true }) } catch {}
  }
  process.exit(0)
}
process.stdin.on('end', reap)
process.stdin.on('error', reap)
`

let reaper = null

/** Tells the reaper (started on first use) to kill `pid` and remove `dir` if this process dies first. */
function reapLater(pid, dir) {
  if (!reaper) {
    reaper = spawn(process.execPath, ['-e', REAPER], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] })
    reaper.on('error', () => { reaper = null })
    reaper.stdin.on('error', () => {})
    reaper.unref()
    reaper.stdin.unref()
  }
  reaper.stdin.write(`+\t${pid}\t${dir}\n`)
}

function reaped(pid) {
  if (reaper && pid) reaper.stdin.write(`-\t${pid}\n`)
}

const started = new Set()
// A normal exit (process.exit included) stops what is still running, synchronously.
process.on('exit', () => {
  for (const server of started) {
    try {
      if (server.proc) process.kill(server.proc.pid, 'SIGKILL')
    } catch {}
    try {
      fs.rmSync(server.dir, { recursive: true, force: true })
    } catch {}
  }
})

function redisServerAvailable() {
  const r = spawnSync(BIN, ['--version'], { encoding: 'utf8' })
  return r.status === 0
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** Sends one inline command over a fresh socket and resolves the first reply line. */
function command(port, line, timeoutMs = 1000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port })
    let buf = ''
    const done = (err, value) => {
      sock.destroy()
      clearTimeout(timer)
      if (err) reject(err)
      else resolve(value)
    }
    const timer = setTimeout(() => done(new Error(`no reply to ${line} within ${timeoutMs} ms`)), timeoutMs)
    sock.on('connect', () => sock.write(`${line}\r\n`))
    sock.on('data', (d) => {
      buf += d
      const i = buf.indexOf('\r\n')
      if (i >= 0) done(null, buf.slice(0, i))
    })
    sock.on('error', (e) => done(e))
  })
}

async function waitFor(check, { timeout = 5000, interval = 20, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout
  let last
  for (;;) {
    try {
      const v = await check()
      if (v) return v
    } catch (e) {
      last = e
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ''}`)
    await new Promise((r) => setTimeout(r, interval))
  }
}

class RedisServer {
  /** `config`: text of a configuration file written into the server's folder and passed first (a sentinel needs one). */
  constructor(port, extraArgs, { config } = {}) {
    this.port = port
    this.extraArgs = extraArgs
    this.config = config
    this.url = `redis://127.0.0.1:${port}`
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-redis-'))
    this.log = ''
    this.proc = null
  }

  get pid() {
    return this.proc ? this.proc.pid : null
  }

  async start() {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', this.dir, '--daemonize', 'no', ...this.extraArgs]
    if (this.config !== undefined) {
      const file = path.join(this.dir, 'redis.conf')
      // Written anew on every start: a sentinel rewrites its file as it learns the topology.
      fs.writeFileSync(file, this.config)
      args.unshift(file)
    }
    const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    this.proc = proc
    started.add(this)
    if (proc.pid) reapLater(proc.pid, this.dir)
    proc.stdout.on('data', (d) => { this.log = (this.log + d).slice(-8000) })
    proc.stderr.on('data', (d) => { this.log = (this.log + d).slice(-8000) })
    let exited = false
    proc.once('exit', () => { exited = true })
    proc.once('error', () => { exited = true })
    await waitFor(async () => {
      if (exited) throw new Error(`redis-server exited:\n${this.log}`)
      return (await command(this.port, 'PING', 300)) === '+PONG'
    }, { timeout: 10000, what: `redis-server on port ${this.port}` })
    return this
  }

  /** SIGKILL and wait for exit. */
  async kill() {
    const proc = this.proc
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return
    const exited = new Promise((r) => proc.once('exit', r))
    process.kill(proc.pid, 'SIGKILL')
    await exited
    reaped(proc.pid)
  }

  pause() {
    process.kill(this.proc.pid, 'SIGSTOP')
  }

  resume() {
    process.kill(this.proc.pid, 'SIGCONT')
  }

  /** Starts again on the same port, empty. */
  async restart() {
    await this.kill()
    return this.start()
  }

  async stop() {
    if (!this.proc) return
    try {
      this.resume()
    } catch {}
    await this.kill()
    fs.rmSync(this.dir, { recursive: true, force: true })
    started.delete(this)
    this.proc = null
  }

  command(line) {
    return command(this.port, line)
  }
}

/** Starts a redis-server on a free loopback port (retrying if the port was taken meanwhile). */
async function startRedis(extraArgs = [], options = {}) {
  let lastErr
  for (let i = 0; i < 5; i++) {
    const server = new RedisServer(await freePort(), extraArgs, options)
    try {
      return await server.start()
    } catch (e) {
      lastErr = e
      await server.stop().catch(() => {})
    }
  }
  throw lastErr
}

let tls = null

/**
 * Whether the server binary was built with TLS (Valkey's embedded build is not): asked with
 * TLS options it cannot satisfy, so it exits at once either way without listening anywhere.
 */
function serverSupportsTls() {
  if (tls === null) {
    const r = spawnSync(BIN, ['--port', '0', '--tls-port', '1', '--tls-cert-file', '/nonexistent', '--tls-key-file', '/nonexistent',
      '--save', '', '--appendonly', 'no', '--daemonize', 'no'], { encoding: 'utf8', timeout: 10000 })
    tls = /Failed to configure TLS|tls-ca-cert/.test(`${r.stdout}${r.stderr}`)
  }
  return tls
}

module.exports = { startRedis, redisServerAvailable, serverSupportsTls, waitFor, freePort, RedisServer, BIN }
