// Compiled with `tsc --noEmit` against index.d.ts: the public surface as a TypeScript user sees it.
import { LockClient, LockError, withLock, DistributedLock, type ClusterNode, type SentinelOptions, type Lock, type LockStats } from 'lockdog'
import Redis from 'ioredis'

async function main(): Promise<number> {
  const locks = new LockClient({ url: 'redis://127.0.0.1:6379', keyPrefix: 'lock:', ttl: 30_000 })
  const secure = new LockClient({ url: 'rediss://127.0.0.1:6380', tls: { ca: Buffer.from('pem'), cert: 'pem', key: 'pem' }, fencing: true })
  void secure
  const member: ClusterNode = { cluster: ['redis://10.0.2.1:7000'] }
  const quorum = new LockClient({ nodes: ['redis://10.0.1.1:6379', member, { cluster: ['redis://10.0.3.1:7000'] }] })
  void quorum
  const sentinelOptions: SentinelOptions = { sentinels: ['redis://127.0.0.1:26379'], name: 'mymaster', password: 'pw', db: 1 }
  const followed = new LockClient({ sentinel: sentinelOptions, waitReplicas: 1 })
  void followed
  // @ts-expect-error the master's name is required
  void new LockClient({ sentinel: { sentinels: ['redis://127.0.0.1:26379'] } })
  const ac = new AbortController()
  const lock: Lock = await locks.acquire('order:1001:pay', {
    ttl: 10_000, retryCount: 5, retryDelay: 100, retryJitter: 50, waitTimeout: 2_000,
    signal: ac.signal, maxHold: 60_000, onLost: (err: LockError) => console.error(err.code),
  })
  const remaining: number = lock.remaining
  const held: boolean = lock.held
  const status: 'held' | 'released' | 'lost' | 'handed-over' = lock.status
  lock.signal.addEventListener('abort', () => {})
  await lock.extend(5_000)
  const released: boolean = await lock.release()
  const handed: { keys: string[]; token: string; remaining: number; fence: number | null } = lock.handOver()
  void handed
  const maybe: Lock | null = await locks.tryAcquire(['a', 'b'], { ttl: 1_000 })
  const n: number = await locks.withLock('k', async (signal, l) => (signal.aborted ? 0 : l.ttl))
  const s: string = await withLock('k', () => 'sync result')
  const redis = new Redis()
  await withLock(redis, 'k', async () => undefined, 30_000)
  const dl = new DistributedLock(redis, 'k', 30_000)
  const ok: boolean = await dl.acquire()
  await dl.release()
  locks.on('lost', (err, l) => console.log(err.code, l?.key))
  const stats: LockStats = locks.stats()
  const found = await locks.inspect('k')
  const fenceSeen: number | null = found.fence
  const removed: number = await locks.forceRelease('k')
  const fence: number | null = lock.fence
  const acked: number | null = (await locks.acquire('r', { waitReplicas: 1, waitReplicasTimeout: 50 })).replicas
  const woken: number = stats.woken
  void acked
  void woken
  void fenceSeen
  void removed
  void fence
  try {
    await locks.acquire('k')
  } catch (e) {
    if (e instanceof LockError && e.code === 'ERR_LOCK_TAKEN') console.log(e.remainingMs, e.nodes[0]?.node)
  }
  {
    await using scoped = await locks.acquire('scoped')
    void scoped.token
  }
  await locks.close({ graceful: 1000 })
  return remaining + Number(held) + status.length + Number(released) + Number(maybe) + n + s.length + Number(ok) + stats.held
}

void main

import Redlock, { ExecutionError, ResourceLockedError } from 'lockdog/redlock'

async function redlockUsage(): Promise<void> {
  const clients = [new Redis({ host: '127.0.0.1', port: 6379 }), new Redis({ host: '127.0.0.1', port: 6380 })]
  const redlock = new Redlock(clients, { driftFactor: 0.01, retryCount: 10, retryDelay: 200, retryJitter: 100 })
  redlock.on('error', (err) => {
    if (err instanceof ResourceLockedError) return
    console.error(err)
  })
  let lock = await redlock.acquire(['locks:order:1'], 5000)
  lock = await lock.extend(2000)
  const when: number = lock.expiration
  await lock.release()
  const out: number = await redlock.using(['a'], 1000, async (signal) => (signal.aborted ? 0 : 1))
  try {
    await redlock.acquire(['x'], 100)
  } catch (e) {
    if (e instanceof ExecutionError) console.log(e.attempts.length, e.code)
  }
  void when
  void out
}
void redlockUsage

import { Semaphore, ReadWriteLock, type AdoptOptions, type PermitOptions } from 'lockdog'

async function primitivesUsage(locks: LockClient): Promise<number> {
  const opts: AdoptOptions = { ttl: 30000, onLost: (err) => console.error(err.code) }
  const adopted: Lock = await locks.adopt('report', 'token', opts)
  const locked: boolean = await locks.isLocked('report')
  const sem: Semaphore = locks.semaphore('api', { limit: 5, ttl: 10000 })
  const permit: PermitOptions = { permits: 2, waitTimeout: 1000 }
  const slot: Lock = await sem.acquire(permit)
  const maybe: Lock | null = await sem.tryAcquire()
  const r: string = await sem.withPermit(async (signal) => (signal.aborted ? 'no' : 'yes'))
  const n: number = await sem.count()
  const { permits, holders, limit } = await sem.inspect()
  await slot.release()
  await adopted.release()
  const fairLocks = new LockClient({ url: 'redis://127.0.0.1:6390', fair: true })
  await (await fairLocks.acquire('queue', { fair: false, waitTimeout: 10 })).release()
  const rw: ReadWriteLock = locks.readWriteLock('doc', { ttl: 5000 })
  const reader: Lock = await rw.readLock({ waitTimeout: 100 })
  const writer: Lock | null = await rw.tryWriteLock()
  const w: number = await rw.withWriteLock(async (signal, lock) => (signal.aborted ? 0 : lock.ttl))
  const rr: string = await rw.withReadLock(() => rw.key)
  await reader.release()
  const fairSem: Semaphore = locks.semaphore('api', { limit: 5, fair: true })
  await (await fairSem.acquire({ permits: 2, fair: false })).release()
  const fairRw: ReadWriteLock = locks.readWriteLock('doc', { fair: true })
  await (await fairRw.writeLock({ fair: true, waitTimeout: 100 })).release()
  void writer
  void w
  void rr
  return n + permits + holders + limit + sem.limit + r.length + Number(locked) + Number(maybe === null)
}
void primitivesUsage
