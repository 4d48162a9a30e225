// CommonJS TypeScript (.cts): `import x = require()` and the import forms that compile to require.
import Redlock = require('lockdog/redlock')
import lockdog = require('lockdog')
import { ExecutionError, ResourceLockedError, Lock, type Settings } from 'lockdog/redlock'
import { LockClient, withLock, type LockStats } from 'lockdog'

export async function main(): Promise<void> {
  const redlock = new Redlock(['redis://127.0.0.1:6379'], { retryCount: 3 })
  const lock: Redlock.Lock = await redlock.acquire(['a'], 1000)
  const extended: Lock = await lock.extend(1000)
  await extended.release()
  const settings: Redlock.Settings = redlock.settings
  const same: Settings = settings
  void new Redlock.default(['redis://127.0.0.1:6379'])
  void new Redlock.Redlock(['redis://127.0.0.1:6379'])
  const err: Redlock.ExecutionError | null = null
  void [ExecutionError, ResourceLockedError, same, err]

  const locks = new lockdog.LockClient({ url: 'redis://127.0.0.1:6379' })
  const fast: boolean = locks.fastPath
  const stats: LockStats = new LockClient().stats()
  const n: number = await withLock('k', async () => 42)
  void new lockdog.Redlock(['redis://127.0.0.1:6379'])
  void [fast, stats, n]
  // @ts-expect-error the key must be a string or an array of strings
  await locks.acquire(42)
  // @ts-expect-error the duration must be a number
  await redlock.acquire(['a'], '1s')
}
