'use strict'

const { LockClient } = require('./lib/client')
const { Lock } = require('./lib/lock')
const { LockError } = require('./lib/errors')
const { DistributedLock, withLock } = require('./lib/adapters/handwritten')
const Redlock = require('./lib/adapters/redlock')
const { Semaphore } = require('./lib/semaphore')
const { ReadWriteLock } = require('./lib/rwlock')

module.exports = {
  LockClient,
  Lock,
  LockError,
  DistributedLock,
  withLock,
  Redlock,
  Semaphore,
  ReadWriteLock,
  ExecutionError: Redlock.ExecutionError,
  ResourceLockedError: Redlock.ResourceLockedError,
}
