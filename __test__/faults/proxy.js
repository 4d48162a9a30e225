'use strict'

// A small TCP proxy on a loopback port in front of one redis-server. On command
// it adds latency (per direction), stalls (holds bytes until unstalled), drops
// bytes, refuses new connections, or cuts every open connection.

const net = require('node:net')

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/g

class FaultProxy {
  constructor(targetPort) {
    this.targetPort = targetPort
    this.port = 0
    this.server = null
    this.conns = new Set()
    this.latencyUp = 0 // client -> redis, ms
    this.latencyDown = 0 // redis -> client, ms
    this.stalled = false
    this.dropping = false
    this.refusing = false
    this.accepted = 0
    // When each lock token passed towards Redis (process.hrtime.bigint(), every
    // time): bounds when its acquisition started, for the validity check.
    this.firstSeen = new Map()
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  start() {
    return new Promise((resolve, reject) => {
      this.server = net.createServer((client) => this.#accept(client))
      this.server.on('error', reject)
      this.server.listen(0, '127.0.0.1', () => {
        this.port = this.server.address().port
        resolve(this)
      })
    })
  }

  #accept(client) {
    if (this.refusing) {
      client.destroy()
      return
    }
    this.accepted++
    const upstream = net.connect({ host: '127.0.0.1', port: this.targetPort })
    const conn = { client, upstream, held: [] }
    this.conns.add(conn)
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    const close = () => {
      if (!this.conns.delete(conn)) return
      client.destroy()
      upstream.destroy()
      for (const h of conn.held) clearTimeout(h.timer)
    }
    client.on('error', close)
    upstream.on('error', close)
    client.on('close', close)
    upstream.on('close', close)
    // Chunks keep their order: each leaves no earlier than the one before it.
    let lastUp = 0
    let lastDown = 0
    const pipe = (data, to, dir) => {
      if (this.dropping) return
      const latency = dir === 'up' ? this.latencyUp : this.latencyDown
      const now = performance.now()
      const last = dir === 'up' ? lastUp : lastDown
      const at = Math.max(now + latency, last)
      if (dir === 'up') lastUp = at
      else lastDown = at
      const send = () => {
        if (this.stalled) {
          conn.held.push({ to, data, timer: null })
          return
        }
        if (!to.destroyed) to.write(data)
      }
      if (at - now <= 0 && conn.held.length === 0) send()
      else {
        const h = { to, data, timer: null }
        h.timer = setTimeout(() => {
          const i = conn.held.indexOf(h)
          if (i >= 0) conn.held.splice(i, 1)
          send()
        }, at - now)
        // keep track so cut() can cancel
        conn.held.push(h)
      }
    }
    client.on('data', (d) => {
      const t = process.hrtime.bigint()
      if (this.firstSeen.size < 2_000_000) {
        for (const m of d.toString('latin1').matchAll(UUID)) {
          const seen = this.firstSeen.get(m[0])
          if (seen) seen.push(t)
          else this.firstSeen.set(m[0], [t])
        }
      }
      pipe(d, upstream, 'up')
    })
    upstream.on('data', (d) => pipe(d, client, 'down'))
  }

  /** Adds `ms` of latency in `dir` ('up', 'down' or 'both'). */
  setLatency(ms, dir = 'both') {
    if (dir === 'up' || dir === 'both') this.latencyUp = ms
    if (dir === 'down' || dir === 'both') this.latencyDown = ms
  }

  /** Holds every byte (both ways) until unstall(). */
  stall() {
    this.stalled = true
  }

  unstall() {
    this.stalled = false
    for (const conn of this.conns) {
      const pending = conn.held.filter((h) => h.timer === null)
      conn.held = conn.held.filter((h) => h.timer !== null)
      for (const h of pending) if (!h.to.destroyed) h.to.write(h.data)
    }
  }

  /** Silently discards every byte while on. */
  drop(on = true) {
    this.dropping = on
  }

  /** Refuses (accepts and closes) new connections while on. */
  refuse(on = true) {
    this.refusing = on
  }

  /** Cuts every open connection. */
  cut() {
    for (const conn of [...this.conns]) {
      conn.client.destroy()
      conn.upstream.destroy()
    }
  }

  heal() {
    this.setLatency(0)
    this.drop(false)
    this.refuse(false)
    this.unstall()
  }

  close() {
    this.cut()
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()))
  }
}

module.exports = { FaultProxy }
