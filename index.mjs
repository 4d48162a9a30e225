import { createRequire } from 'node:module'

const lockdog = createRequire(import.meta.url)('./index.js')

export const { LockClient, Lock, LockError, DistributedLock, withLock } = lockdog
export default lockdog
