'use strict'

// The names lockdog derives beside a lock key ({k}:fence, {k}:writer,
// {k}:line, {k}:line:lease) are reserved: a lock on one is refused with a
// typed error, so it can never block or break the lock it belongs to.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const Redlock = require('../redlock')
const { serverAndClient } = require('./helpers')

let server
let redis
let client
serverAndClient({}, (s) => ({ server, redis, client } = s))

const reserved = (name, of) => (e) => {
  assert.equal(e.code, 'ERR_INVALID_ARG_VALUE')
  assert.ok(e.message.includes(`"${name}"`), e.message)
  assert.ok(e.message.includes(`lock "${of}"`), e.message)
  return true
}

test('a lock on a derived name is refused, naming the lock it belongs to', async () => {
  const locks = client()
  assert.throws(() => locks.acquire('{doc}:writer'), reserved('{doc}:writer', 'doc'))
  assert.throws(() => locks.acquire('{fk}:fence'), reserved('{fk}:fence', 'fk'))
  assert.throws(() => locks.tryAcquire('{q}:line'), reserved('{q}:line', 'q'))
  assert.throws(() => locks.acquire(['ok', '{q}:line:lease']), reserved('{q}:line:lease', 'q'))
  assert.throws(() => locks.acquire('order:{42}:fence'), reserved('order:{42}:fence', 'order:{42}'))
  assert.throws(() => locks.adopt('{fk}:fence', 'some-token'), (e) => e.code === 'ERR_INVALID_ARG_VALUE')
  assert.throws(() => locks.semaphore('{s}:writer', { limit: 2 }).acquire(), (e) => e.code === 'ERR_INVALID_ARG_VALUE')
  assert.equal(await redis.exists('{doc}:writer', '{fk}:fence', '{q}:line', 'order:{42}:fence'), 0, 'nothing was written')
})

test('with a hash-tagged keyPrefix the derived names are checked as stored', () => {
  const locks = client({ keyPrefix: '{app}:' })
  // Stored as "{app}:x:fence": the fence counter of "{app}:x".
  assert.throws(() => locks.acquire('x:fence'), (e) => e.code === 'ERR_INVALID_ARG_VALUE' && /fence counter/.test(e.message))
})

test('names that only look alike stay usable, and the locks they sit beside work', async () => {
  const locks = client({ fencing: true })
  for (const name of ['doc:writer', 'a:fence', '{a}:fencer', '{}:fence', '{a}:lines']) {
    const lock = await locks.acquire(name, { ttl: 2000 })
    assert.equal(await lock.release(), true, name)
  }
  // The collisions of the report can no longer happen: a fencing acquire of "fk"
  // and a read-write lock on "doc" work beside user locks on similar names.
  const fenced = await locks.acquire('fk', { ttl: 2000 })
  assert.equal(typeof fenced.fence, 'number')
  await fenced.release()
  const plain = client()
  const rw = plain.readWriteLock('doc')
  const reader = await rw.readLock({ ttl: 2000, waitTimeout: 2000 })
  await reader.release()
})

test('the redlock drop-in refuses a derived resource name with votes against', async () => {
  const redlock = new Redlock([server.url], { retryCount: 0 })
  try {
    const err = await redlock.acquire(['{doc}:writer'], 1000).catch((e) => e)
    assert.ok(err instanceof Redlock.ExecutionError)
    const votes = await err.attempts[0]
    const [vote] = votes.votesAgainst.values()
    assert.equal(vote.code, 'ERR_INVALID_ARG_VALUE')
    assert.equal(await redis.exists('{doc}:writer'), 0)
  } finally {
    await redlock.quit()
  }
})
