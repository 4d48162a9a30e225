'use strict'

const binding = require('../binding.js')

/**
 * Every lock failure: an Error with a stable `code`.
 * Codes: ERR_LOCK_TAKEN, ERR_LOCK_TIMEOUT, ERR_LOCK_LOST, ERR_LOCK_ABORTED,
 * ERR_LOCK_CONNECTION, ERR_LOCK_REDIS, ERR_LOCK_QUORUM, ERR_LOCK_CLOSED.
 */
class LockError extends Error {
  constructor(code, message, detail = {}) {
    super(message, 'cause' in detail ? { cause: detail.cause } : undefined)
    this.name = code === 'ERR_LOCK_ABORTED' ? 'AbortError' : 'LockError'
    this.code = code
    if (detail.key != null) this.key = detail.key
    this.attempts = detail.attempts ?? 0
    if (detail.remainingMs != null) this.remainingMs = detail.remainingMs
    this.nodes = detail.nodes ?? []
    // Built by the native layer, an error has no JS frames; Bun then gives it no stack at all.
    if (typeof this.stack !== 'string') {
      Object.defineProperty(this, 'stack', { value: `${this.name}: ${message}`, writable: true, configurable: true })
    }
  }
}

function argError(Kind, code, message) {
  const err = new Kind(message)
  err.code = code
  return err
}

function describe(value) {
  if (value == null) return ` Received ${value}`
  if (typeof value === 'function') return ` Received function ${value.name || '<anonymous>'}`
  if (typeof value === 'object') {
    const name = value.constructor && value.constructor.name
    return name ? ` Received an instance of ${name}` : ' Received an object'
  }
  let shown = String(value)
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`
  if (typeof value === 'string') shown = `'${shown}'`
  return ` Received type ${typeof value} (${shown})`
}

const invalidType = (name, expected, value) =>
  argError(TypeError, 'ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}.${describe(value)}`)
const invalidValue = (name, reason) =>
  argError(TypeError, 'ERR_INVALID_ARG_VALUE', `The argument '${name}' ${reason}`)

const outOfRange = (name, range, value) =>
  argError(RangeError, 'ERR_OUT_OF_RANGE', `The value of "${name}" is out of range. It must be ${range}. Received ${value}`)

// The native layer builds its failures as this class (RangeError / TypeError
// for an argument's value), on each JS thread that loads this module.
binding.setErrorClass(LockError)

/**
 * An error from the native layer is typed there but carries no JS frames: it
 * gets the stack of the lib/ call that awaited it, which V8 and JSC extend
 * with the caller's async frames, so a failure points at the code that asked.
 */
function withStack(err) {
  if (err instanceof Error && !/\n\s+at /.test(String(err.stack)) && Error.captureStackTrace) {
    Error.captureStackTrace(err, withStack)
  }
  return err
}

module.exports = { LockError, withStack, invalidType, invalidValue, outOfRange }
