'use strict'

// A Sentinel deployment on loopback: a master, a replica and three sentinels
// (quorum 2), each a redis-server started on a free port and stopped by PID.

const Redis = require('ioredis')
const { startRedis, waitFor } = require('../../scripts/local-redis')

const NAME = 'mymaster'

/** One command on a fresh connection (none is left reconnecting to a killed server). */
async function call(port, ...args) {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 })
  r.on('error', () => {})
  try {
    await r.connect()
    return await r.call(...args)
  } finally {
    r.disconnect()
  }
}

/** `SENTINEL <sub> NAME` replies (arrays of flat field lists) as objects. */
const fields = (list) => list.map((flat) => Object.fromEntries(flat.flatMap((v, i) => (i % 2 ? [] : [[v, flat[i + 1]]]))))

/**
 * Starts the deployment and waits until every sentinel knows the replica and the
 * two other sentinels (so that a failover can be agreed and has a replica to promote).
 */
async function startSentinels({ downAfter = 1000, failoverTimeout = 4000 } = {}) {
  const servers = []
  const started = async (p) => {
    const s = await p
    servers.push(s)
    return s
  }
  try {
    const master = await started(startRedis())
    const replica = await started(startRedis(['--replicaof', '127.0.0.1', String(master.port)]))
    await waitFor(async () => (await call(replica.port, 'INFO', 'replication')).includes('master_link_status:up'),
      { timeout: 10000, what: 'the replica in sync with the master' })
    const config = [
      `sentinel monitor ${NAME} 127.0.0.1 ${master.port} 2`,
      `sentinel down-after-milliseconds ${NAME} ${downAfter}`,
      `sentinel failover-timeout ${NAME} ${failoverTimeout}`,
      `sentinel parallel-syncs ${NAME} 1`,
      '',
    ].join('\n')
    const sentinels = []
    for (let i = 0; i < 3; i++) sentinels.push(await started(startRedis(['--sentinel'], { config })))
    for (const s of sentinels) {
      await waitFor(async () => {
        const replicas = fields(await call(s.port, 'SENTINEL', 'REPLICAS', NAME))
        const peers = await call(s.port, 'SENTINEL', 'SENTINELS', NAME)
        return replicas.some((r) => Number(r.port) === replica.port && !/s_down|disconnected/.test(r.flags)) && peers.length === 2
      }, { timeout: 20000, interval: 100, what: `sentinel ${s.port} to know the replica and its peers` })
    }
    return new Topology(master, replica, sentinels)
  } catch (e) {
    await Promise.all(servers.map((s) => s.stop().catch(() => {})))
    throw e
  }
}

class Topology {
  constructor(master, replica, sentinels) {
    this.name = NAME
    this.master = master
    this.replica = replica
    this.sentinels = sentinels
    this.urls = sentinels.map((s) => s.url)
  }

  /** The master's port as sentinel `i` names it. */
  async masterPort(i = 0) {
    const [, port] = await call(this.sentinels[i].port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', NAME)
    return Number(port)
  }

  /** The data server (master or replica) on `port`. */
  server(port) {
    return [this.master, this.replica].find((s) => s.port === port)
  }

  /** `ROLE` of the data server on `port`: 'master' or 'slave'. */
  async role(port) {
    return (await call(port, 'ROLE'))[0]
  }

  /**
   * Asks a sentinel for a failover (again while it answers that none can start
   * yet: a demoted master becomes a usable replica only some seconds after a
   * failover); resolves with the promoted server once it reports itself master
   * and every sentinel names it (`promotedAt` is when it first reported master).
   */
  async failover() {
    const before = await this.masterPort()
    const other = before === this.master.port ? this.replica : this.master
    await waitFor(async () => {
      const info = await call(other.port, 'INFO', 'replication')
      return info.includes(`master_port:${before}`) && info.includes('master_link_status:up')
    }, { timeout: 30000, interval: 100, what: `server ${other.port} replicating from the master` })
    await waitFor(async () => (await call(this.sentinels[0].port, 'SENTINEL', 'FAILOVER', NAME)) === 'OK',
      { timeout: 30000, interval: 200, what: 'a sentinel to start a failover' })
    await waitFor(async () => (await this.role(other.port)) === 'master', { timeout: 15000, what: 'the replica promoted' })
    this.promotedAt = performance.now()
    for (let i = 0; i < this.sentinels.length; i++) {
      await waitFor(async () => (await this.masterPort(i)) === other.port, { timeout: 15000, what: `sentinel ${i} to name the new master` })
    }
    return other
  }

  async stop() {
    await Promise.all([this.master, this.replica, ...this.sentinels].map((s) => s.stop().catch(() => {})))
  }
}

module.exports = { startSentinels, call, NAME }
