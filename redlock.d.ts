// `lockdog/redlock`: the redlock v5 API on lockdog's native quorum lock.
// CommonJS form (`const Redlock = require('lockdog/redlock')`, `import Redlock =
// require('lockdog/redlock')`): the module is the Redlock class, which also carries
// Lock, ExecutionError, ResourceLockedError, Redlock and default, as redlock.js does.
// redlock.d.mts gives ES modules the same declarations.

import type { EventEmitter } from 'node:events'
import type { RedisLike } from './index'

declare class Redlock extends EventEmitter {
  /**
   * One client (ioredis, node-redis, URL or options) per independent Redis master;
   * an ioredis `Cluster` is one member (a whole cluster, keys routed by slot), alone
   * or among others. Custom `scripts` are not supported (they throw).
   */
  constructor(clients: Iterable<RedisLike>, settings?: Partial<Redlock.Settings>, scripts?: unknown)
  readonly clients: Set<RedisLike>
  readonly settings: Redlock.Settings
  acquire(resources: string[], duration: number, settings?: Partial<Redlock.Settings>): Promise<Redlock.Lock>
  release(lock: Redlock.Lock, settings?: Partial<Redlock.Settings>): Promise<Redlock.ExecutionResult>
  extend(existing: Redlock.Lock, duration: number, settings?: Partial<Redlock.Settings>): Promise<Redlock.Lock>
  using<T>(resources: string[], duration: number, settings: Partial<Redlock.Settings>, routine?: (signal: Redlock.RedlockAbortSignal) => Promise<T>): Promise<T>
  using<T>(resources: string[], duration: number, routine: (signal: Redlock.RedlockAbortSignal) => Promise<T>): Promise<T>
  quit(): Promise<void>
  on(event: 'error', listener: (err: Error) => void): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
}

declare namespace Redlock {
  export interface Settings {
    /** Clock drift allowance as a share of the duration. The default value is 0.01. */
    readonly driftFactor: number
    /**
     * Retries after the first attempt, whatever failed (a held key or an unreachable
     * node); -1: no limit. The default value is 10.
     */
    readonly retryCount: number
    /** Pause between attempts in ms. The default value is 200. */
    readonly retryDelay: number
    /** Random extra pause of 0..retryJitter ms. The default value is 100. */
    readonly retryJitter: number
    /**
     * `using` refuses a duration under this + 100 ms, as redlock does; the renewal
     * itself is native, every duration / 3. The default value is 500.
     */
    readonly automaticExtensionThreshold: number
  }

  export interface ExecutionStats {
    readonly membershipSize: number
    readonly quorumSize: number
    /** The clients (as given to the constructor) that voted for the operation. */
    readonly votesFor: Set<RedisLike>
    /** The clients that voted against, each with its reason (`ResourceLockedError` when held). */
    readonly votesAgainst: Map<RedisLike, Error>
  }

  export interface ExecutionResult {
    attempts: ReadonlyArray<Promise<ExecutionStats>>
  }

  /**
   * Aborts when the lock is lost; `signal.error` is then an `ExecutionError` with
   * code ERR_LOCK_LOST (its `cause` lockdog's loss error).
   */
  export type RedlockAbortSignal = AbortSignal & { error?: Error }

  /** A resource is held by another owner on a node. */
  export class ResourceLockedError extends Error {
    constructor(message: string)
  }

  /**
   * No quorum within the retry window (`attempts`: one promise of votes per attempt).
   * `code` is ERR_LOCK_QUORUM, or ERR_LOCK_LOST when `using` found its lock gone
   * (then `cause` is the routine's result or error).
   */
  export class ExecutionError extends Error {
    constructor(message: string, attempts: ReadonlyArray<Promise<ExecutionStats>>)
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>
    code: 'ERR_LOCK_QUORUM' | 'ERR_LOCK_LOST'
  }

  export class Lock {
    constructor(redlock: Redlock, resources: string[], value: string, attempts: ReadonlyArray<Promise<ExecutionStats>>, expiration: number)
    readonly redlock: Redlock
    readonly resources: string[]
    readonly value: string
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>
    /** Wall-clock ms when the lock's validity ends (0 once released or replaced by `extend`). */
    expiration: number
    release(): Promise<ExecutionResult>
    extend(duration: number): Promise<Lock>
  }
  export { Redlock, Redlock as default }
}

export = Redlock
