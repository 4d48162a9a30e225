'use strict'

const { test: nodeTest, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { LockClient, DistributedLock } = require('..')
const { startRedis, inspector, freePort, waitFor } = require('./helpers')
const { serverSupportsTls, BIN } = require('../scripts/local-redis')

// A server built without TLS (Valkey's embedded build) skips this file's tests.
const noTls = !serverSupportsTls() && `${BIN} was built without TLS`
const test = (name, fn) => nodeTest(name, { skip: noTls }, fn)

let dir
let pem
let server
let mtls
let tlsPort
let mtlsPort
let redis

function openssl(...args) {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
}

before(async () => {
  if (noTls) return
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-tls-'))
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=lockdog test CA')
  for (const name of ['server', 'client']) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`)
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', 'ext.cnf')
  }
  pem = Object.fromEntries(['ca.crt', 'server.crt', 'server.key', 'client.crt', 'client.key'].map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]))
  const tlsArgs = (port, auth) => ['--tls-port', String(port), '--tls-cert-file', path.join(dir, 'server.crt'),
    '--tls-key-file', path.join(dir, 'server.key'), '--tls-ca-cert-file', path.join(dir, 'ca.crt'), '--tls-auth-clients', auth]
  tlsPort = await freePort()
  server = await startRedis(tlsArgs(tlsPort, 'no'))
  mtlsPort = await freePort()
  mtls = await startRedis(tlsArgs(mtlsPort, 'yes'))
  redis = inspector(server)
  await redis.acl('SETUSER', 'locker', 'on', '>s3cret-pw', '~*', '&*', '+@all')
  // Redis 7's default for new users: no pub/sub channel at all.
  await redis.acl('SETUSER', 'nochan', 'on', '>n0chan-pw', '~*', 'resetchannels', '+@all')
})

after(async () => {
  if (noTls) return
  redis.disconnect()
  await server.stop()
  await mtls.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

test('rediss:// with a CA: locks work over TLS', async () => {
  const locks = new LockClient({ url: `rediss://127.0.0.1:${tlsPort}`, tls: { ca: pem['ca.crt'] } })
  const lock = await locks.acquire('tls:a')
  assert.equal(await redis.get('tls:a'), lock.token)
  assert.equal(await lock.release(), true)
  await locks.close()
})

test('an untrusted server certificate fails with ERR_LOCK_CONNECTION', async () => {
  const locks = new LockClient({ url: `rediss://127.0.0.1:${tlsPort}`, connectTimeout: 1000 })
  await assert.rejects(locks.acquire('tls:b'), { code: 'ERR_LOCK_CONNECTION' })
  await locks.close()
})

test('client certificates (mutual TLS), from strings or Buffers', async () => {
  const without = new LockClient({ url: `rediss://127.0.0.1:${mtlsPort}`, tls: { ca: pem['ca.crt'] }, connectTimeout: 1000 })
  await assert.rejects(without.acquire('mtls:a'), (e) => ['ERR_LOCK_CONNECTION', 'ERR_LOCK_REDIS'].includes(e.code))
  await without.close()
  const locks = new LockClient({
    url: `rediss://127.0.0.1:${mtlsPort}`,
    tls: { ca: Buffer.from(pem['ca.crt']), cert: pem['client.crt'], key: Buffer.from(pem['client.key']) },
  })
  const lock = await locks.acquire('mtls:a')
  assert.equal(await lock.release(), true)
  await locks.close()
  assert.throws(() => new LockClient({ url: `rediss://127.0.0.1:${mtlsPort}`, tls: { cert: pem['client.crt'] } }), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => new LockClient({ url: `rediss://127.0.0.1:${mtlsPort}`, tls: { ca: 42 } }), { code: 'ERR_INVALID_ARG_TYPE' })
})

test('ACL username and password; a wrong password never shows in errors', async () => {
  const locks = new LockClient({ url: `rediss://locker:s3cret-pw@127.0.0.1:${tlsPort}`, tls: { ca: pem['ca.crt'] } })
  const lock = await locks.acquire('acl:a')
  assert.equal(await redis.get('acl:a'), lock.token)
  await lock.release()
  await locks.close()
  const wrong = new LockClient({ url: `rediss://locker:not-the-pw@127.0.0.1:${tlsPort}`, tls: { ca: pem['ca.crt'] } })
  const err = await wrong.acquire('acl:b').then(() => null, (e) => e)
  assert.ok(err && ['ERR_LOCK_REDIS', 'ERR_LOCK_CONNECTION'].includes(err.code), String(err))
  assert.doesNotMatch(`${err.message} ${JSON.stringify(err.nodes)} ${err.stack}`, /not-the-pw|s3cret/)
  await wrong.close()
  assert.equal(await redis.exists('acl:b'), 0)
})

test('over TLS, a waiter is woken by the release notice', async () => {
  const opts = { url: `rediss://locker:s3cret-pw@127.0.0.1:${tlsPort}`, tls: { ca: pem['ca.crt'] } }
  const a = new LockClient(opts)
  const b = new LockClient(opts)
  try {
    const held = await a.acquire('tls:wake')
    const waiting = b.acquire('tls:wake', { retryDelay: 60_000, retryJitter: 0, waitTimeout: 120_000 })
    await waitFor(async () => (await redis.pubsub('NUMSUB', '__lockdog:released:tls:wake'))[1] === 1, { what: 'the subscription over TLS' })
    assert.equal(await held.release(), true)
    const lock = await waiting
    assert.equal(b.stats().woken, 1)
    assert.equal(await lock.release(), true)
  } finally {
    await a.close()
    await b.close()
  }
})

test('an ACL user without channel rights still releases; its waiters fall back to their retry timer', async () => {
  const opts = { url: `rediss://nochan:n0chan-pw@127.0.0.1:${tlsPort}`, tls: { ca: pem['ca.crt'] } }
  const a = new LockClient(opts)
  const b = new LockClient(opts)
  const errors = []
  b.on('error', (e) => errors.push(e))
  try {
    const held = await a.acquire('acl:nochan')
    const waiting = b.acquire('acl:nochan', { retryDelay: 300, retryJitter: 0, waitTimeout: 10_000 })
    await waitFor(() => b.stats().contended === 1, { what: 'the waiter to find the lock held' })
    assert.equal(await held.release(), true, 'PUBLISH is refused by the ACL, the release is not')
    assert.equal(await redis.exists('acl:nochan'), 0)
    const lock = await waiting
    assert.equal(b.stats().woken, 0)
    assert.ok(lock.attempts >= 2)
    assert.equal(await lock.release(), true)
    assert.deepEqual(errors, [])
  } finally {
    await a.close()
    await b.close()
  }
})

test('an ioredis client with TLS options is read as rediss:// with its CA', async () => {
  const io = new Redis({ host: '127.0.0.1', port: tlsPort, tls: { ca: pem['ca.crt'] }, lazyConnect: true })
  const lock = new DistributedLock(io, 'tls:io', 2000)
  assert.equal(await lock.acquire(), true)
  assert.equal(await redis.get('tls:io'), lock.token)
  assert.equal(await lock.release(), true)
  io.disconnect()
})
