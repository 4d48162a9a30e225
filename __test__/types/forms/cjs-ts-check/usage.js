// @ts-check
// CommonJS in a JavaScript file checked by TypeScript: the README's require forms.
'use strict'

const Redlock = require('lockdog/redlock')
const { ExecutionError, ResourceLockedError, Lock } = require('lockdog/redlock')
const { LockClient, withLock, LockError, Redlock: RedlockToo } = require('lockdog')
const lockdog = require('lockdog')

async function main() {
  const redlock = new Redlock(['redis://127.0.0.1:6379'], { retryCount: 3 })
  const lock = await redlock.acquire(['a'], 1000)
  /** @type {number} */
  const expiration = (await lock.extend(1000)).expiration
  await lock.release()
  /** @type {InstanceType<typeof Redlock.Lock>} */
  const same = lock
  void same
  void new Redlock.default(['redis://127.0.0.1:6379'])
  void new Redlock.Redlock(['redis://127.0.0.1:6379'])
  void new RedlockToo(['redis://127.0.0.1:6379'])
  /** @type {import('lockdog/redlock').Settings | null} */
  const settings = null
  void settings
  void [ExecutionError, ResourceLockedError, Lock, expiration]

  const locks = new LockClient({ url: 'redis://127.0.0.1:6379' })
  /** @type {boolean} */
  const fast = locks.fastPath
  const n = await withLock('k', async () => 42)
  /** @type {number} */
  const m = n
  void new lockdog.LockClient()
  void [fast, m, LockError]
  // @ts-expect-error the key must be a string or an array of strings
  await locks.acquire(42)
  // @ts-expect-error the duration must be a number
  await redlock.acquire(['a'], '1s')
}
void main
