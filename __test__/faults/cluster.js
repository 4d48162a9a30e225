'use strict'

// N redis-server lock nodes, each behind a FaultProxy, plus one separate "data"
// redis-server for the read-modify-write counters (never faulted). Every
// process is started and stopped by PID.

const Redis = require('ioredis')
const { startRedis, waitFor } = require('../../scripts/local-redis')
const { FaultProxy } = require('./proxy')

const now = () => process.hrtime.bigint()

class Cluster {
  constructor(n) {
    this.n = n
    this.nodes = []
    this.proxies = []
    this.inspectors = []
    this.data = null
    this.dataClient = null
    this.events = [] // harness-side events (faults, heals), same clock as workers
  }

  static async start(n) {
    const c = new Cluster(n)
    const servers = await Promise.all([...Array(n + 1)].map(() => startRedis()))
    c.data = servers.pop()
    c.nodes = servers
    c.proxies = await Promise.all(c.nodes.map((s) => new FaultProxy(s.port).start()))
    c.inspectors = c.nodes.map((s) => c.#inspector(s.port))
    c.dataClient = c.#inspector(c.data.port)
    return c
  }

  #inspector(port) {
    const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false, retryStrategy: () => 50 })
    r.on('error', () => {}) // nodes are killed on purpose
    return r
  }

  /** URLs workers use: through the proxies (default) or straight to the servers. */
  urls({ direct = false } = {}) {
    return direct ? this.nodes.map((s) => s.url) : this.proxies.map((p) => p.url)
  }

  /** token -> every time it passed a proxy towards Redis, per proxy (ns bigints). */
  tokensSeen() {
    const out = new Map()
    for (const p of this.proxies) {
      for (const [tok, ts] of p.firstSeen) {
        if (!out.has(tok)) out.set(tok, [])
        out.get(tok).push(ts)
      }
    }
    return out
  }

  get dataUrl() {
    return this.data.url
  }

  mark(kind, detail = {}) {
    const ev = { ev: kind, t: String(now()), ...detail }
    this.events.push(ev)
    return ev
  }

  pause(i) {
    this.mark('fault', { what: 'pause', node: i })
    this.nodes[i].pause()
  }

  resume(i) {
    this.nodes[i].resume()
    this.mark('heal', { what: 'resume', node: i })
  }

  async kill(i) {
    this.mark('fault', { what: 'kill', node: i })
    await this.nodes[i].kill()
  }

  /** Starts a killed node again, empty, on the same port. */
  async start(i) {
    await this.nodes[i].start()
    this.mark('heal', { what: 'start', node: i })
  }

  async restart(i) {
    this.mark('fault', { what: 'restart', node: i })
    await this.nodes[i].restart()
    this.mark('heal', { what: 'restarted', node: i })
  }

  /** Every lock key left on any node (keys under `prefix`), with its PTTL. */
  async leftovers(prefix) {
    const out = []
    for (let i = 0; i < this.n; i++) {
      const r = this.inspectors[i]
      let keys = []
      try {
        keys = await r.keys(`${prefix}*`)
      } catch {
        continue
      }
      for (const k of keys) out.push({ node: i, key: k, pttl: await r.pttl(k).catch(() => null) })
    }
    return out
  }

  /** Waits until no lock key is left (keys may expire by TTL); returns what is left. */
  async waitNoLeftovers(prefix, timeout) {
    let left = []
    try {
      await waitFor(async () => {
        left = await this.leftovers(prefix)
        return left.length === 0
      }, { timeout, interval: 50, what: 'no lock keys left' })
    } catch {}
    return left
  }

  async flushData() {
    await this.dataClient.flushall()
    for (const r of this.inspectors) await r.flushall().catch(() => {})
  }

  async stop() {
    for (const r of [...this.inspectors, this.dataClient]) if (r) r.disconnect()
    await Promise.all(this.proxies.map((p) => p.close()))
    await Promise.all([...this.nodes, this.data].filter(Boolean).map((s) => s.stop().catch(() => {})))
  }
}

module.exports = { Cluster, now }
