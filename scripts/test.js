'use strict'

// The JavaScript test runner behind `npm test` and the tiers around it.
//
//   node scripts/test.js                  `npm test`: `cargo test` (the Rust core), the type check,
//                                         then every __test__/*.test.* file on one Node (this
//                                         shell's when lockdog supports it, else the newest tested
//                                         version, fetched once into .cache/)
//   node scripts/test.js FILE...          only those files (same Node)
//   node scripts/test.js --node 22,24,26  the whole suite on each listed Node in turn; every version
//                                         runs even when an earlier one fails, and a summary names
//                                         each version's result (`npm run test:matrix`)
//
// The fault-injection suite (`npm run test:faults`) and the registry round trip
// (`npm run test:package`) are tiers of their own; `npm run test:all` runs every tier.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const root = path.join(__dirname, '..')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const reporter = require('node:url').pathToFileURL(path.join(__dirname, 'failures-reporter.mjs')).href
const nodeVersions = require('./node-versions')
const { redisServerAvailable, BIN } = require('./local-redis')

function usage(msg) {
  console.error(`${msg}\nusage: node scripts/test.js [FILE...] | --node MAJOR[,MAJOR...]`)
  process.exit(64)
}

let opts
try {
  opts = parseArgs({ allowPositionals: true, options: { node: { type: 'string' } } })
} catch (e) {
  usage(e.message)
}
const files = opts.positionals
const majors = opts.values.node === undefined
  ? null
  : opts.values.node.split(',').map((m) => {
    const n = Number(m.trim())
    if (!nodeVersions.TESTED.includes(n)) usage(`--node: ${m} is not a tested version (${nodeVersions.TESTED.join(', ')})`)
    return n
  })
if (majors && files.length) usage('--node runs the whole suite: give no files with it')

if (!redisServerAvailable()) {
  console.error(`redis-server not found (${BIN}). Install it (apt-get install redis-server) or set REDIS_SERVER_BIN.`)
  process.exit(1)
}

function run(cmd, args) {
  console.log(`\n$ ${[path.relative(root, cmd) || cmd, ...args].join(' ')}`)
  return spawnSync(cmd, args, { cwd: root, stdio: 'inherit' }).status ?? 1
}

/** The Node binaries to run on: [{ major, bin, version }]. */
function pickNodes() {
  let found = nodeVersions.find().found
  const wanted = majors ?? (found.some((f) => f.major === nodeVersions.current)
    ? [nodeVersions.current]
    : [Math.max(...nodeVersions.TESTED)])
  if (wanted.some((m) => !found.some((f) => f.major === m))) {
    nodeVersions.install(wanted)
    found = nodeVersions.find().found
  }
  for (const m of wanted) {
    if (!found.some((f) => f.major === m)) console.log(`Node ${m} could not be installed (npm package ${nodeVersions.pkgName}@${m})`)
  }
  return found.filter((f) => wanted.includes(f.major))
}

const suite = files.length
  ? files
  : fs.readdirSync(path.join(root, '__test__'))
    .filter((f) => /\.test\.(js|mjs|ts)$/.test(f))
    .sort()
    .map((f) => path.join('__test__', f))

const nodes = pickNodes()
if (!nodes.length) {
  console.error('No tested Node version could be found or installed: run node scripts/node-versions.js install')
  process.exit(1)
}
if (!majors && nodes[0].major !== nodeVersions.current) {
  console.log(`This shell's Node ${process.version} is not a tested version (${nodeVersions.TESTED.join(', ')}): running on Node ${nodes[0].version}.`)
}

// The Rust core's tests (napi-free, against real redis-servers) belong to the loop too;
// the matrix and single files leave them to `cargo test`.
let cargoStatus = 0
if (!files.length && !majors) {
  const cargo = process.env.CARGO || 'cargo'
  if (spawnSync(cargo, ['--version'], { stdio: 'ignore' }).status === 0) {
    cargoStatus = run(cargo, ['test', '--quiet'])
  } else {
    console.log('\ncargo not found: skipping the Rust tests (cargo test)')
  }
}

// Test files mostly wait on servers and timers: two at a time even on a 2-core
// machine (node's default there is one). LOCKDOG_TEST_CONCURRENCY overrides it.
const concurrency = Number(process.env.LOCKDOG_TEST_CONCURRENCY) || Math.max(2, os.availableParallelism() - 1)

const results = []
for (const { bin, version } of nodes) {
  const t0 = performance.now()
  let status = 0
  if (!files.length) status = run(bin, [tsc, '-p', '__test__/types'])
  console.log(`\n${suite.length} test file(s) on Node ${version}`)
  const failuresFile = path.join(os.tmpdir(), `lockdog-test-failures-${process.pid}-${version}.txt`)
  fs.rmSync(failuresFile, { force: true })
  status = run(bin, [
    '--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000',
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    `--test-reporter=${reporter}`, `--test-reporter-destination=${failuresFile}`,
    ...suite
  ]) || status
  let failed = []
  try {
    failed = fs.readFileSync(failuresFile, 'utf8').split('\n').filter(Boolean)
    fs.rmSync(failuresFile, { force: true })
  } catch {}
  results.push({ version, status, failed, seconds: Math.round((performance.now() - t0) / 1000) })
}
// The failures again, last, one line each: a long log's tail says which tests failed.
if (cargoStatus !== 0) console.log(`FAILED TEST: cargo test exited ${cargoStatus} (its "failures:" list is above)`)
for (const r of results) {
  for (const f of r.failed) console.log(`FAILED TEST (Node ${r.version}): ${f}`)
}
if (majors) {
  console.log('\nNode matrix:')
  for (const r of results) console.log(`  Node ${r.version}: ${r.status === 0 ? 'passed' : `FAILED (exit ${r.status})`} in ${r.seconds} s`)
  const missing = majors.filter((m) => !nodes.some((n) => n.major === m))
  for (const m of missing) console.log(`  Node ${m}: not installed`)
  if (missing.length) process.exitCode = 1
}
if (cargoStatus !== 0 || results.some((r) => r.status !== 0)) process.exitCode = 1
