'use strict'

const { LockClient, Lock } = require('./lib/client')
const { LockError } = require('./lib/errors')
const { DistributedLock, withLock } = require('./lib/compat')

module.exports = { LockClient, Lock, LockError, DistributedLock, withLock }
