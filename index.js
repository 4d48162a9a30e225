'use strict'

const { LockClient, Lock } = require('./lib/client')
const { LockError } = require('./lib/errors')
const { DistributedLock, withLock } = require('./lib/compat')
const Redlock = require('./lib/redlock')
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
