// Public typings of lockdog. Option, stats and lock-property docs are generated
// from the Rust `///` comments into binding.d.ts and re-used here.

import type { EventEmitter } from 'node:events'
import type {
  AcquireOptions as NativeAcquireOptions,
  ClusterNode,
  LockClientOptions as NativeLockClientOptions,
  LockInspection,
  LockStats,
  LockView,
  NodeHealth,
  NodeRecovered,
  SemaphoreCount,
  SentinelOptions as NativeSentinelOptions,
} from './binding'

export type { ClusterNode, LockStats, NodeHealth, NodeRecovered }

/** PEM text, as a string or a Buffer (or a list of them for `ca`). */
export type Pem = string | Buffer | ReadonlyArray<string | Buffer>

/** How to find a master through Redis Sentinel. */
export interface SentinelOptions extends Omit<NativeSentinelOptions, 'sentinels' | 'name'> {
  /** URLs of the sentinels, `redis://[user:password@]host:port`, asked in turn (at least one). */
  sentinels: string[]
  /** The name the sentinels monitor the master under, e.g. `'mymaster'`. */
  name: string
}

/** How a `LockClient` reaches Redis, and the defaults for its locks. */
export interface LockClientOptions extends Omit<NativeLockClientOptions, 'tls' | 'sentinel'> {
  /**
   * A master found through Redis Sentinel: locks follow it to the replica a
   * failover promotes. Cannot be combined with `url`, `nodes`, `cluster` or `tls`.
   */
  sentinel?: SentinelOptions
  /**
   * Take locks, semaphores' permits and read-write locks fairly unless an
   * acquisition says otherwise: waiters in every process are served in arrival
   * order through a line kept in Redis (one key per lock; one node or a
   * cluster, not Redlock). The default value is `false`.
   */
  fair?: boolean
  /** Certificates for `rediss://` URLs: a CA to trust instead of the system's store, and a client certificate and key. */
  tls?: { ca?: Pem; cert?: Pem; key?: Pem }
}

/** What `LockClient#inspect` found; absent values are null. */
export interface Inspection {
  /** True when a quorum of nodes holds the key with one value. */
  held: LockInspection['held']
  /** The holder's remaining TTL in ms (the shortest among the quorum). */
  remainingMs: number | null
  /** The holder's token, masked to its first 8 characters. */
  holder: string | null
  /** The key's fence counter (the last token handed out). */
  fence: number | null
}

/** Stable codes of `LockError`. */
export type LockErrorCode =
  | 'ERR_LOCK_TAKEN'
  | 'ERR_LOCK_TIMEOUT'
  | 'ERR_LOCK_LOST'
  | 'ERR_LOCK_ABORTED'
  | 'ERR_LOCK_CONNECTION'
  | 'ERR_LOCK_REDIS'
  | 'ERR_LOCK_QUORUM'
  | 'ERR_LOCK_CLOSED'

/** What one Redis node answered. */
export interface NodeDetail {
  /** `host:port` (never with credentials). */
  node: string
  answer: 'ok' | 'held' | 'not-held' | 'timeout' | 'unreachable' | 'error'
  detail: string
}

/**
 * Every lock failure. Bad arguments are Node-style `TypeError`/`RangeError`s
 * with `code` `ERR_INVALID_ARG_TYPE`, `ERR_INVALID_ARG_VALUE` or `ERR_OUT_OF_RANGE`.
 */
export declare class LockError extends Error {
  constructor(code: LockErrorCode, message: string, detail?: Partial<LockError> & { cause?: unknown })
  readonly code: LockErrorCode
  /** `'AbortError'` for ERR_LOCK_ABORTED, else `'LockError'`. */
  readonly name: 'LockError' | 'AbortError'
  /** The lock key(s) concerned. */
  key?: string
  /** Acquisition attempts made. */
  attempts: number
  /** How long the current holder's lease still runs, when known (ERR_LOCK_TAKEN, ERR_LOCK_TIMEOUT). */
  remainingMs?: number
  /** Per-node answers of the last attempt (Redlock detail). */
  nodes: NodeDetail[]
  /** `withLock`: fn's result when only the release failed. */
  result?: unknown
  /**
   * On a client's `'error'` event: how many faults identical to this one (same
   * node, same text) were not emitted since it last was. Within 10 s of
   * emitting a fault, the client counts its repeats instead of emitting them.
   */
  repeated?: number
}

/** Settings of one acquisition. */
export interface AcquireOptions extends NativeAcquireOptions {
  /** Cancels the wait; the acquire then rejects with ERR_LOCK_ABORTED. */
  signal?: AbortSignal
  /**
   * Serve waiters of every process in arrival order through a line kept in
   * Redis (locks on one key; one node or a cluster). The default value is the
   * client's `fair` (for a semaphore or read-write lock: its own `fair`, else
   * the client's). Acquisitions of one key should all use the same mode.
   */
  fair?: boolean
  /** Called once if the lock is lost while held (ERR_LOCK_LOST). */
  onLost?: (err: LockError, lock: Lock) => void
}

/** What `LockClient#adopt` accepts: the lease settings of `AcquireOptions` (there is nothing to wait for). */
export interface AdoptOptions
  extends Pick<NativeAcquireOptions, 'ttl' | 'maxHold' | 'renewInterval' | 'autoRenew' | 'waitReplicas' | 'waitReplicasTimeout'> {
  /** Called once if the lock is lost while held (ERR_LOCK_LOST). */
  onLost?: (err: LockError, lock: Lock) => void
}

/** `LockClient#semaphore` options: `limit` and defaults for its acquisitions. */
export interface SemaphoreOptions extends NativeAcquireOptions {
  /** The most permits held at once (an integer from 1 to 100000). */
  limit: number
  /**
   * Serve waiters in arrival order across processes: permits are taken only
   * when they fit beside those of every earlier waiter still in line. The
   * default value is the client's `fair`.
   */
  fair?: boolean
}

/** `LockClient#readWriteLock` options: defaults for its acquisitions. */
export interface ReadWriteLockOptions extends NativeAcquireOptions {
  /**
   * Serve readers and writers in arrival order across processes instead of
   * writer preference: consecutive readers at the head of the line enter
   * together, a writer alone once everyone before it is done. The default
   * value is the client's `fair`.
   */
  fair?: boolean
}

/** `Semaphore#acquire` options. */
export interface PermitOptions extends AcquireOptions {
  /** Permits to take at once, all or nothing (an integer from 1 to `limit`). The default value is 1. */
  permits?: number
}

/**
 * At most `limit` permits of one key held at once. Holders whose lease ended
 * (a crashed process) are reclaimed by the next acquisition. Each holder is a
 * `Lock`: released, extended, signalled and reported lost exactly like a lock.
 */
export declare class Semaphore {
  private constructor()
  readonly key: string
  readonly limit: number
  /** Takes the permits, waiting while too few are free (rejects ERR_LOCK_TIMEOUT / ERR_LOCK_ABORTED / ERR_LOCK_TAKEN). */
  acquire(options?: PermitOptions): Promise<Lock>
  /** One attempt: the holder's Lock, or null when too few permits are free. */
  tryAcquire(options?: PermitOptions): Promise<Lock | null>
  /** Takes the permits, runs `fn(signal, lock)`, always releases; rejects ERR_LOCK_LOST if they were lost meanwhile. */
  withPermit<T>(fn: LockedFn<T>, options?: PermitOptions): Promise<Awaited<T>>
  /**
   * Permits held now by unexpired holders, as a quorum of nodes counts them
   * (on several nodes: the holders that at least a quorum of nodes record).
   */
  count(): Promise<number>
  /** What is held now, as a quorum of nodes counts it (see `count`). */
  inspect(): Promise<SemaphoreCount & { limit: number }>
}

/**
 * Many readers or one writer on one key. Each reader and the writer is a
 * `Lock` (signal, onLost, release, extend), renewed by the native watchdog.
 * Writer preference: a waiting writer holds new readers off; the readers
 * already in finish first, so a stream of readers cannot starve a writer.
 * With `fair`, arrival order instead (see `ReadWriteLockOptions.fair`).
 */
export declare class ReadWriteLock {
  private constructor()
  readonly key: string
  /** Takes a read lock (beside other readers, never beside a writer). */
  readLock(options?: AcquireOptions): Promise<Lock>
  /** Takes the write lock (alone). */
  writeLock(options?: AcquireOptions): Promise<Lock>
  /** One attempt at a read lock: the Lock, or null. */
  tryReadLock(options?: AcquireOptions): Promise<Lock | null>
  /** One attempt at the write lock (leaves no writer's mark): the Lock, or null. */
  tryWriteLock(options?: AcquireOptions): Promise<Lock | null>
  /** Runs `fn(signal, lock)` under a read lock, always releasing; as `withLock`. */
  withReadLock<T>(fn: LockedFn<T>, options?: AcquireOptions): Promise<Awaited<T>>
  /** Runs `fn(signal, lock)` under the write lock, always releasing; as `withLock`. */
  withWriteLock<T>(fn: LockedFn<T>, options?: AcquireOptions): Promise<Awaited<T>>
}

export interface Lock extends Pick<LockView, 'key' | 'keys' | 'token' | 'remaining' | 'held' | 'ttl' | 'attempts' | 'fence' | 'replicas' | 'nodes'> {}

/** A held lock, renewed by the native watchdog until released. */
export declare class Lock implements AsyncDisposable {
  private constructor()
  /** Where the lock is in its life. */
  readonly status: 'held' | 'released' | 'lost' | 'handed-over'
  /** Aborts when the lock is lost (reason: a `LockError` ERR_LOCK_LOST) or its client is closed (ERR_LOCK_CLOSED). */
  readonly signal: AbortSignal
  /** The error the lock was lost with, or null. */
  readonly lossError: LockError | null
  /** Extends the lease to `ttl` ms from now (same token); never recreates a lost key. */
  extend(ttl?: number): Promise<void>
  /**
   * Releases (watchdog first). True if it was ours; false if already released or lost. A release that
   * finds the key gone or another owner's is a loss: reported like one (signal, onLost, 'lost').
   */
  release(): Promise<boolean>
  /**
   * Lets go without releasing, for another client to `adopt(keys, token)`: renewals stop, the keys keep
   * their lease, and this Lock never deletes them afterwards. Throws ERR_LOCK_LOST when no longer held.
   */
  handOver(): LockHandOver
  /** Releases on scope exit: `await using lock = await locks.acquire('k')`. */
  [Symbol.asyncDispose](): Promise<void>
}

/** What `Lock#handOver()` returns: what the adopting client needs. */
export interface LockHandOver {
  key: string
  keys: string[]
  /** Pass to `adopt(keys, token)`. */
  token: string
  /** Milliseconds of validity left when it was handed over. */
  remaining: number
  fence: number | null
}

/** The routine run under a lock; `signal` aborts if the lock is lost. */
export type LockedFn<T> = (signal: AbortSignal, lock: Lock) => T | PromiseLike<T>

/** Key of a lock: one key, or several locked together as one lock. */
export type LockKey = string | readonly string[]

/**
 * A Redis lock client: one shared connection per node and a native watchdog.
 * With several `nodes` (masters, or whole clusters as `{ cluster: [...] }`) every operation runs the Redlock algorithm.
 */
export declare class LockClient extends EventEmitter implements AsyncDisposable {
  constructor(options?: LockClientOptions)
  /** `host:port` of each node; one `cluster host:port,…` entry for a Redis Cluster, one `sentinel name (host:port,…)` for Sentinel. */
  readonly nodes: string[]
  /**
   * Whether plain operations take the fast path (the JS thread's own event loop, once its
   * connection is ready); false when every operation takes the Rust runtime path:
   * `LOCKDOG_FAST_PATH=0`, Bun, Deno, Windows, TLS, Cluster, Sentinel, `resp3`. Decided when the
   * client is created.
   */
  readonly fastPath: boolean
  /** True once `close()` was called. */
  readonly closed: boolean
  /** Takes the lock, waiting while another owner holds it (rejects ERR_LOCK_TAKEN / ERR_LOCK_TIMEOUT / ERR_LOCK_ABORTED). */
  acquire(key: LockKey, options?: AcquireOptions): Promise<Lock>
  /** One attempt: the Lock, or null when another owner holds it. */
  tryAcquire(key: LockKey, options?: AcquireOptions): Promise<Lock | null>
  /**
   * Acquires, runs `fn(signal, lock)`, always releases. Rejects ERR_LOCK_LOST
   * (with fn's result or error as `cause`) if the lock was lost meanwhile.
   */
  withLock<T>(key: LockKey, fn: LockedFn<T>, options?: AcquireOptions): Promise<Awaited<T>>
  /**
   * Resolves once the nodes that operations did not wait for have answered or
   * timed out: with several nodes, acquire/extend/release resolve as soon as a
   * quorum decided, and the other nodes finish in the background (their faults
   * still reach `'error'`). `close()` waits for them too.
   */
  settled(): Promise<void>
  /** Counters since the client was created. */
  stats(): LockStats
  /**
   * Each node's health, in the order of `nodes`. A node is down from its first
   * connection failure (timeout, refused or broken connection, no master) until
   * it answers again; meanwhile the client PINGs it (100 ms after, then up to
   * every second) and emits `'reconnected'` when it answers.
   */
  health(): NodeHealth[]
  /** Reads a lock key on every node without changing it. */
  inspect(key: string): Promise<Inspection>
  /**
   * Continues the lock on `key` whose value is `token` (handed over by another
   * process, or kept across a restart): one token-checked extend to `ttl` on
   * every node, then the native watchdog renews it like an acquired lock.
   * Never creates a key: rejects ERR_LOCK_LOST when the key is gone or holds
   * another token. The adopted lock's `fence` is null.
   */
  adopt(key: LockKey, token: string, options?: AdoptOptions): Promise<Lock>
  /**
   * Deletes the lock on `key` wherever its keys hold `token`, without adopting
   * it: one token-checked delete on every node. `released` is true when a quorum
   * of nodes held the token; `nodes` gives each node's answer (`ok` where it did).
   */
  releaseToken(key: LockKey, token: string): Promise<{ released: boolean; nodes: NodeDetail[] }>
  /**
   * A counting semaphore on `key`: at most `limit` permits held at once across
   * every process; each holder has its own token and lease, renewed by the
   * native watchdog. The other options are defaults for its acquisitions.
   * Every user of one key must give the same `limit`. On several nodes
   * (Redlock) the permits are `limit` numbered slots, each a mutex a majority
   * of nodes grants, so the limit holds under Redlock's own fault model.
   */
  semaphore(key: string, options: SemaphoreOptions): Semaphore
  /**
   * A read-write lock on `key`: any number of readers or one writer across
   * every process. Writer preference: once a writer waits, new readers wait
   * behind it. `options` are defaults for its acquisitions.
   */
  readWriteLock(key: string, options?: ReadWriteLockOptions): ReadWriteLock
  /** Whether a quorum of nodes holds `key` now, whoever the owner; changes nothing. */
  isLocked(key: string): Promise<boolean>
  /** UNSAFE, for operators: deletes the key on every node whoever holds it. Resolves on how many nodes it existed. */
  forceRelease(key: string): Promise<number>
  /**
   * Ends the client. Every lock still held is ended first (its signal aborts and
   * its onLost runs with ERR_LOCK_CLOSED; a running withLock rejects with it),
   * then released; then connections close. With `graceful`, first waits up to
   * that many ms for running withLock calls to finish.
   */
  close(options?: { graceful?: number }): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
  /**
   * A held lock was lost (`err.code` is ERR_LOCK_LOST; `err.key` names its key).
   * `lock` is the Lock that was lost; it is `undefined` only when the program no
   * longer referenced that Lock (it was garbage-collected before the loss was
   * found), so nobody holds it to be told. The lock's own `signal` and `onLost`
   * are told as well.
   */
  on(event: 'lost', listener: (err: LockError, lock: Lock | undefined) => void): this
  /**
   * A node failed to answer. The first fault of an outage is emitted at once;
   * a fault identical to the node's last emitted one within 10 s is counted in
   * the next one's `repeated` instead (`stats().errors` counts every fault).
   */
  on(event: 'error', listener: (err: LockError) => void): this
  /** A node that had failed answers again (its outage is over). */
  on(event: 'reconnected', listener: (info: NodeRecovered) => void): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
}

/** An ioredis or node-redis client, a `LockClient`, a Redis URL, or `{ host, port, ... }`. */
export type RedisLike = LockClient | string | { options?: object } | { host?: string; port?: number; [k: string]: unknown }

/**
 * `withLock(key, fn, options?)` on the default client (REDIS_URL, else redis://127.0.0.1:6379).
 * Its first node failure (e.g. no Redis running there) prints one process warning,
 * code LOCKDOG_NODE_FAILED; the call keeps trying until its waitTimeout (10 s by default).
 */
export declare function withLock<T>(key: LockKey, fn: LockedFn<T>, options?: AcquireOptions): Promise<Awaited<T>>
/** `withLock(redis, key, fn, ttl = 30000)`: one attempt (ERR_LOCK_TAKEN if held), as the hand-written helper had it. */
export declare function withLock<T>(redis: RedisLike, key: LockKey, fn: LockedFn<T>, ttl?: number): Promise<Awaited<T>>

/** The hand-written lock's shape, on lockdog: one-attempt `acquire()` → boolean, native watchdog. */
export declare class DistributedLock {
  constructor(redis: RedisLike, key: string, ttl?: number)
  readonly key: string
  readonly ttl: number
  /** The current token, or null when not held. */
  token: string | null
  /** The current Lock, or null. */
  lock: Lock | null
  /** Aborts when the lock is lost (null before acquire). */
  readonly signal: AbortSignal | null
  readonly held: boolean
  /** One attempt; true when taken (renewed every ttl/3 natively until released). */
  acquire(): Promise<boolean>
  extend(ttl?: number): Promise<boolean>
  /** Resolves whether the lock was still ours. */
  release(): Promise<boolean>
}

export { Redlock, ExecutionError, ResourceLockedError } from './redlock'
