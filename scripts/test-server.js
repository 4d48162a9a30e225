'use strict'

// `npm run test:valkey` (node scripts/test-server.js valkey), `npm run test:valkey-9`,
// `npm run test:redis-6.2`:
// the Redis-dependent test files (those that start servers) against another server
// than the redis-server on PATH: REDIS_SERVER_BIN points at the binary that
// `node scripts/runtimes.js install <name>` unpacks into .cache/ (fetched here when
// missing): Valkey 8.1.8, Valkey 9.1.2, or Redis 6.2.14. scripts/test.js runs the files on the Node
// that `npm test` uses. File arguments narrow the run
// (`npm run test:valkey -- __test__/lock.test.js`). The fault suite stays on the
// default server (`npm run test:faults`): its broken-build checks do not depend on it.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const runtimes = require('./runtimes')

const root = path.join(__dirname, '..')

const [name, ...only] = process.argv.slice(2)
if (!runtimes.RUNTIMES[name] || !runtimes.RUNTIMES[name].server) {
  console.error('usage: node scripts/test-server.js valkey|valkey-9|redis-6.2 [test files]')
  process.exit(2)
}
if (!runtimes.binOf(name) && runtimes.install([name])) process.exit(1)
const bin = runtimes.binOf(name)
const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim()
console.log(`REDIS_SERVER_BIN=${bin}\n${version}`)

const files = only.length
  ? only
  : fs.readdirSync(path.join(root, '__test__'))
    .filter((f) => /\.test\.(js|mjs|ts)$/.test(f))
    .filter((f) => /\b(serverAndClient|startRedis|startSentinels|startCluster)\b/.test(fs.readFileSync(path.join(root, '__test__', f), 'utf8')))
    .sort()
    .map((f) => path.join('__test__', f))

const r = spawnSync(process.execPath, [path.join(__dirname, 'test.js'), ...files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, REDIS_SERVER_BIN: bin },
})
process.exit(r.status ?? 1)
