import { createRequire } from 'node:module'

const lockdog = createRequire(import.meta.url)('./index.js')

export const { LockClient, Lock, LockError, DistributedLock, withLock, Redlock, ExecutionError, ResourceLockedError, Semaphore, ReadWriteLock } =
  lockdog
export default lockdog
