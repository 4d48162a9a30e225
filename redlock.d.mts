// Types for `import Redlock from 'lockdog/redlock'` in an ES module: the default
// export is the Redlock class (a value and a type), as redlock.mjs exports it.
import { Redlock } from './redlock.js'

export * from './redlock.js'
export default Redlock
