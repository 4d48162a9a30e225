'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const diagnostics = require('node:diagnostics_channel')
const { LockClient } = require('..')
const { startRedis, inspector, waitFor } = require('./helpers')

let server
let redis

before(async () => {
  server = await startRedis()
  redis = inspector(server)
})

after(async () => {
  redis.disconnect()
  await server.stop()
})

test('fencing tokens grow with every holder of a key and live beside it in Redis', async () => {
  const locks = new LockClient({ url: server.url, fencing: true, keyPrefix: 'app:' })
  const fences = []
  for (let i = 0; i < 3; i++) {
    const lock = await locks.acquire('fenced')
    fences.push(lock.fence)
    await lock.release()
  }
  assert.deepEqual(fences, [1, 2, 3])
  assert.equal(await redis.get('{app:fenced}:fence'), '3')
  const plain = new LockClient({ url: server.url })
  const lock = await plain.acquire('unfenced')
  assert.equal(lock.fence, null, 'fencing is opt-in')
  assert.equal(await redis.exists('{unfenced}:fence'), 0)
  await lock.release()
  await plain.close()
  await locks.close()
})

test('a stale holder is refused by a resource that checks the fence', async () => {
  const locks = new LockClient({ url: server.url, fencing: true })
  // The protected resource: a write script that refuses fences older than the newest seen.
  const write = async (value, fence) => redis.eval(
    "local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0') " +
    "if tonumber(ARGV[2]) < seen then return 0 end " +
    "redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2]) return 1",
    1, 'resource', value, fence)
  const first = await locks.acquire('res', { ttl: 300, autoRenew: false })
  await waitFor(() => !first.held, { what: 'the first lease to run out' })
  const second = await locks.acquire('res')
  assert.equal(await write('from second', second.fence), 1)
  assert.equal(await write('from the stale first', first.fence), 0, 'the stale holder is fenced off')
  assert.equal(await redis.hget('resource', 'value'), 'from second')
  await second.release()
  await locks.close()
})

test('inspect shows holder, remaining TTL and fence; forceRelease removes any holder', async () => {
  const locks = new LockClient({ url: server.url, fencing: true })
  const free = await locks.inspect('insp')
  assert.deepEqual(free, { held: false, remainingMs: null, holder: null, fence: null })
  const lock = await locks.acquire('insp', { ttl: 5000 })
  const seen = await locks.inspect('insp')
  assert.equal(seen.held, true)
  assert.ok(seen.remainingMs > 4000 && seen.remainingMs <= 5000)
  assert.equal(seen.holder, `${lock.token.slice(0, 8)}…`)
  assert.equal(seen.fence, lock.fence)
  assert.ok(!JSON.stringify(seen).includes(lock.token), 'the full token is never shown')
  assert.equal(await locks.forceRelease('insp'), 1)
  assert.equal(await redis.exists('insp'), 0)
  assert.equal(await locks.forceRelease('insp'), 0)
  await waitFor(() => lock.status === 'lost', { what: 'the holder to learn of the loss' })
  assert.throws(() => locks.inspect(''), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => locks.forceRelease(['a']), { code: 'ERR_INVALID_ARG_TYPE' })
  await locks.close()
  await assert.rejects(locks.inspect('insp'), { code: 'ERR_LOCK_CLOSED' })
})

test('diagnostics_channel publishes acquire, renew, release and loss', async () => {
  const seen = { acquire: [], renew: [], release: [], lost: [] }
  const handlers = {}
  for (const name of Object.keys(seen)) {
    handlers[name] = (msg) => seen[name].push(msg)
    diagnostics.subscribe(`lockdog:${name}`, handlers[name])
  }
  try {
    const locks = new LockClient({ url: server.url })
    const lock = await locks.acquire('traced', { ttl: 300 })
    await waitFor(() => seen.renew.length >= 2, { what: 'renewal publications' })
    await lock.release()
    const doomed = await locks.acquire('traced2', { ttl: 300 })
    await redis.del('traced2')
    await waitFor(() => seen.lost.length === 1, { what: 'loss publication' })
    assert.equal(seen.acquire[0].key, 'traced')
    assert.equal(seen.acquire[0].token, lock.token)
    assert.ok(seen.renew[0].count >= 1)
    assert.deepEqual(seen.release.map((r) => [r.key, r.released]), [['traced', true]])
    assert.equal(seen.lost[0].key, 'traced2')
    assert.equal(seen.lost[0].error.code, 'ERR_LOCK_LOST')
    assert.equal(seen.lost[0].lock, doomed)
    await locks.close()
  } finally {
    for (const name of Object.keys(seen)) diagnostics.unsubscribe(`lockdog:${name}`, handlers[name])
  }
})

test('waitReplicas: the acquisition and extensions wait for the replica; lock.replicas says how many acknowledged', async () => {
  // A full sync otherwise waits 5 s for more replicas (repl-diskless-sync-delay).
  await redis.config('SET', 'repl-diskless-sync-delay', '0')
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(server.port)])
  const onReplica = inspector(replica)
  const locks = new LockClient({ url: server.url, waitReplicas: 1, waitReplicasTimeout: 2000 })
  try {
    await waitFor(async () => /master_link_status:up/.test(await onReplica.info('replication')), { what: 'the replica to sync', timeout: 30_000 })
    const lock = await locks.acquire('replicated')
    assert.equal(lock.replicas, 1)
    assert.equal(await onReplica.get('replicated'), lock.token, 'WAIT returned: the replica has the key')
    await lock.extend(20_000)
    assert.equal(lock.replicas, 1)
    assert.equal(await lock.release(), true)
    const plain = await locks.acquire('plain', { waitReplicas: 0 })
    assert.equal(plain.replicas, null)
    await plain.release()
    // Bad options throw at the call, before anything is sent.
    assert.throws(() => locks.acquire('x', { waitReplicas: 1.5 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.acquire('x', { ttl: 1000, waitReplicasTimeout: 1000 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => new LockClient({ nodes: [server.url, replica.url], waitReplicas: 1 }), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.acquire('x', { waitReplicas: '1' }), { code: 'ERR_INVALID_ARG_TYPE' })
  } finally {
    await locks.close()
    onReplica.disconnect()
    await replica.stop()
  }
})
