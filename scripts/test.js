'use strict'

// `npm test`: the type check, then every test file under __test__ on each tested
// Node version (scripts/node-versions.js: 22, 24, 26; this shell's node counts
// when it is one of them). Versions not yet there are fetched once from npm into
// .cache/; one that cannot be had is skipped, and the run says so.
// With file arguments (`node scripts/test.js __test__/x.test.js`) only the first
// tested version runs them.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const nodeVersions = require('./node-versions')
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

if (nodeVersions.find().missing.length) nodeVersions.install()
const { found, missing, current } = nodeVersions.find()
if (!nodeVersions.TESTED.includes(current)) {
  console.log(`Not testing on this shell's Node ${process.version}: lockdog is tested on Node ${nodeVersions.TESTED.join(', ')} (package.json engines).`)
}
for (const m of missing) console.log(`Skipping Node ${m.major}: ${m.why}`)
if (!found.length) {
  console.error(`None of the tested Node versions (${nodeVersions.TESTED.join(', ')}) is installed: run node scripts/node-versions.js install`)
  process.exit(1)
}

if (!only.length) run(found[0].bin, [tsc, '-p', '__test__/types'])
const testArgs = ['--import', 'tsx', '--test', '--test-timeout=1800000', ...files]
for (const { bin, version } of only.length ? found.slice(0, 1) : found) {
  console.log(`\n${files.length} test file(s) on Node ${version} (the fault suite builds its broken-modes variant once, cached in target/faults-broken)`)
  run(bin, testArgs)
}
if (!only.length) {
  console.log(`\nTested on Node ${found.map((f) => f.version).join(', ')}` +
    (missing.length ? `; skipped Node ${missing.map((m) => m.major).join(', ')} (could not be installed)` : ''))
}
