'use strict'

// Spawns worker processes, collects their JSON events, delivers signals by PID
// and records when (on the shared monotonic clock), and tears everything down
// with deadlines: nothing here can hang past its timeout.

const { spawn } = require('node:child_process')
const path = require('node:path')
const { now } = require('./cluster')

const WORKER = path.join(__dirname, 'worker.js')
const ROOT = path.join(__dirname, '..', '..')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
/** Resolves p's value, or undefined after `ms` (the timer never keeps the process alive). */
const within = (p, ms) => {
  let timer
  return Promise.race([p, new Promise((r) => { timer = setTimeout(r, ms) })]).finally(() => clearTimeout(timer))
}

class Session {
  /** env: extra env for workers (e.g. the broken build and LOCKDOG_BROKEN). */
  constructor(cluster, { env = {} } = {}) {
    this.cluster = cluster
    this.env = env
    this.base = now()
    this.events = []
    this.workers = new Map()
    this.deaths = new Map() // worker id -> t (ns string)
    this.waiters = []
    this.nextId = 1
  }

  spawn(cfg) {
    const id = cfg.id ?? `w${this.nextId++}`
    const full = { data: this.cluster.dataUrl, ...cfg, id }
    const child = spawn(process.execPath, [WORKER, JSON.stringify(full)], {
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const w = { id, child, cfg: full, stderr: '', exited: null, code: undefined }
    let rest = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (d) => {
      rest += d
      let i
      while ((i = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, i)
        rest = rest.slice(i + 1)
        if (!line) continue
        let e
        try {
          e = JSON.parse(line)
        } catch {
          e = { ev: 'text', w: id, text: line, t: String(now()) }
        }
        this.#push(e)
      }
    })
    child.stderr.on('data', (d) => { w.stderr = (w.stderr + d).slice(-4000) })
    child.stdin.on('error', () => {})
    w.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
      w.code = code
      w.signal = signal
      resolve({ code, signal })
    }))
    this.workers.set(id, w)
    return w
  }

  #push(e) {
    this.events.push(e)
    for (const waiter of [...this.waiters]) {
      if (waiter.pred(e)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1)
        clearTimeout(waiter.timer)
        waiter.resolve(e)
      }
    }
  }

  /** Resolves the first event (past or future, after `since`) matching pred; null on timeout. */
  waitEvent(pred, timeout = 5000, { past = true } = {}) {
    if (past) {
      const hit = this.events.find(pred)
      if (hit) return Promise.resolve(hit)
    }
    return new Promise((resolve) => {
      const waiter = { pred, resolve, timer: null }
      waiter.timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter)
        if (i >= 0) this.waiters.splice(i, 1)
        resolve(null)
      }, timeout)
      this.waiters.push(waiter)
    })
  }

  mark(kind, detail) {
    const e = this.cluster.mark(kind, detail)
    this.events.push(e)
    return e
  }

  signal(w, sig) {
    const t = String(now())
    if (w.child.exitCode !== null || w.child.signalCode !== null) return null
    process.kill(w.child.pid, sig)
    if (sig === 'SIGKILL') this.deaths.set(w.id, t)
    this.events.push({ ev: 'signal', w: w.id, sig, t })
    return t
  }

  /** Asks every worker to stop, then waits; kills (by PID) whatever outlives `timeout`. */
  async stopAll(timeout = 8000) {
    for (const w of this.workers.values()) {
      try {
        w.child.stdin.write('stop\n')
      } catch {}
    }
    const all = Promise.all([...this.workers.values()].map((w) => w.exited))
    const t = (await within(all.then(() => 'ok'), timeout)) || 'timeout'
    const stuck = []
    if (t === 'timeout') {
      for (const w of this.workers.values()) {
        if (w.child.exitCode === null && w.child.signalCode === null) {
          stuck.push(w.id)
          this.deaths.set(w.id, String(now()))
          try {
            process.kill(w.child.pid, 'SIGCONT')
            process.kill(w.child.pid, 'SIGKILL')
          } catch {}
        }
      }
      await within(all, 2000)
    }
    return stuck
  }

  /** Final values of the read-modify-write counters, by key. */
  async finals(keys) {
    const out = {}
    for (const k of keys) out[k] = Number((await this.cluster.dataClient.get(`c:${k}`)) || 0)
    return out
  }

  crashes() {
    const bad = []
    for (const w of this.workers.values()) {
      const killed = this.deaths.has(w.id) || w.signal === 'SIGKILL' || w.signal === 'SIGTERM'
      if (!killed && w.code !== 0 && w.code !== undefined) bad.push({ w: w.id, code: w.code, signal: w.signal, stderr: w.stderr.slice(-600) })
    }
    return bad
  }
}

module.exports = { Session, sleep, within }
