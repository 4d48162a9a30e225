'use strict'

const MARKER = 'lockdog:'

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

/** Turns an error thrown by the native layer into a typed error. */
function fromNative(err) {
  if (!err || typeof err.message !== 'string' || !err.message.startsWith(MARKER)) return err
  let p
  try {
    p = JSON.parse(err.message.slice(MARKER.length))
  } catch {
    return err
  }
  if (p.code === 'ERR_OUT_OF_RANGE') return argError(RangeError, p.code, p.message)
  if (p.code === 'ERR_INVALID_ARG_VALUE') return argError(TypeError, p.code, p.message)
  return new LockError(p.code, p.message, p)
}

module.exports = { LockError, fromNative, invalidType, invalidValue, outOfRange }
