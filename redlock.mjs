import { createRequire } from 'node:module'

const Redlock = createRequire(import.meta.url)('./lib/adapters/redlock.js')

export const { ExecutionError, ResourceLockedError, Lock } = Redlock
export { Redlock }
export default Redlock
