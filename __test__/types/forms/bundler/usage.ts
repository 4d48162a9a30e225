// An ES module in TypeScript (moduleResolution bundler, as a bundler or tsx resolves it): default and named imports of both entry points.
import Redlock, { ExecutionError, ResourceLockedError, Lock, Redlock as Named, type Settings } from 'lockdog/redlock'
import lockdog, { LockClient, withLock, Redlock as FromMain, type LockStats } from 'lockdog'
import * as all from 'lockdog'

export async function main(): Promise<void> {
  const redlock = new Redlock(['redis://127.0.0.1:6379'], { retryCount: 3 })
  const lock: Lock = await redlock.acquire(['a'], 1000)
  await (await lock.extend(1000)).release()
  const settings: Settings = redlock.settings
  void new Named(['redis://127.0.0.1:6379'])
  void new FromMain(['redis://127.0.0.1:6379'])
  void [ExecutionError, ResourceLockedError, settings]

  const locks = new lockdog.LockClient({ url: 'redis://127.0.0.1:6379' })
  const fast: boolean = locks.fastPath
  const stats: LockStats = new LockClient().stats()
  const n: number = await withLock('k', async () => 42)
  void new all.LockClient()
  void [fast, stats, n]
  // @ts-expect-error the key must be a string or an array of strings
  await locks.acquire(42)
  // @ts-expect-error the duration must be a number
  await redlock.acquire(['a'], '1s')
}
