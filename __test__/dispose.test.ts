// `await using` releases a lock on scope exit (run through tsx, which lowers the syntax on Node 20).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { LockClient, type Lock } from 'lockdog'
import helpers from './helpers/index.js'

let server: { url: string; stop(): Promise<void> }
let redis: { get(k: string): Promise<string | null>; exists(k: string): Promise<number>; disconnect(): void }

before(async () => {
  server = await helpers.startRedis()
  redis = helpers.inspector(server)
})

after(async () => {
  redis.disconnect()
  await server.stop()
})

test('await using releases the lock when the scope ends', async () => {
  const locks = new LockClient({ url: server.url })
  let seen: Lock | undefined
  {
    await using lock = await locks.acquire('ts:scoped')
    seen = lock
    assert.equal(await redis.get('ts:scoped'), lock.token)
  }
  assert.equal(seen?.status, 'released')
  assert.equal(await redis.exists('ts:scoped'), 0)
  await locks.close()
})

test('await using releases even when the scope throws', async () => {
  const locks = new LockClient({ url: server.url })
  await assert.rejects(async () => {
    await using lock = await locks.acquire('ts:throw')
    assert.ok(lock.held)
    throw new Error('inside')
  }, /inside/)
  assert.equal(await redis.exists('ts:throw'), 0)
  {
    await using client = locks
    await client.acquire('ts:client')
  }
  assert.equal(locks.closed, true)
  assert.equal(await redis.exists('ts:client'), 0, 'closing the client released its lock')
})
