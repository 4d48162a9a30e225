// Types for `import Redlock, { Lock, ExecutionError } from 'lockdog/redlock'` in an ES
// module: the default export is the Redlock class (a value and a type), as redlock.mjs
// exports it, next to the named exports. The declarations are redlock.d.ts's.
import Redlock = require('./redlock.js')

export default Redlock
export { Redlock }
export import Lock = Redlock.Lock
export import ExecutionError = Redlock.ExecutionError
export import ResourceLockedError = Redlock.ResourceLockedError
export type Settings = Redlock.Settings
export type ExecutionStats = Redlock.ExecutionStats
export type ExecutionResult = Redlock.ExecutionResult
export type RedlockAbortSignal = Redlock.RedlockAbortSignal
