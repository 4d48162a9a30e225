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
// Every test file's process stops itself, with a report, past a time no file needs.
const fileLimit = path.join(__dirname, 'test-file-limit.js')
const reporter = require('node:url').pathToFileURL(path.join(__dirname, 'failures-reporter.mjs')).href
const nodeVersions = require('./node-versions')
const { redisServerAvailable, BIN } = require('./local-redis')
const { addonState, clock } = require('./addon')

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

/**
 * The JS tests load lockdog.<platform>.node, which only a build writes: one older than a
 * Rust source would test code that is no longer there. Rebuild it (with the profile
 * that built it, release by default: incremental, so seconds to a minute when little
 * changed) or, without cargo, stop before any test runs and say what to run.
 */
function freshAddon() {
  if (process.env.NAPI_RS_NATIVE_LIBRARY_PATH) return
  const state = addonState(root)
  if (!state.stale) return
  const debug = state.profile === 'debug'
  const script = debug ? 'build:debug' : 'build'
  const why = state.exists
    ? `${state.name} (built ${clock(state.builtMs)}) is older than ${state.newest.file} (changed ${clock(state.newest.mtimeMs)})`
    : `${state.name} has not been built`
  const cargo = process.env.CARGO || 'cargo'
  if (spawnSync(cargo, ['--version'], { stdio: 'ignore' }).status !== 0) {
    console.error(`${why}, and ${cargo} is not on PATH to rebuild it: the JS tests would test a stale addon.`)
    console.error(`Install Rust, run \`npm run ${script}\`, then npm test again.`)
    process.exit(1)
  }
  console.log(`${why}: rebuilding it first (npm run ${script})`)
  const t0 = performance.now()
  const npm = process.env.npm_execpath
  const build = npm && /\.c?js$/.test(npm)
    ? spawnSync(process.execPath, [npm, 'run', script], { cwd: root, stdio: 'inherit' })
    : spawnSync('npm', ['run', script], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
  if (build.status !== 0) {
    console.error(`npm run ${script} failed (the compiler's error is above): no test was run.`)
    process.exit(build.status || 1)
  }
  const after = addonState(root)
  if (after.stale) {
    console.error(`npm run ${script} succeeded but ${after.name} is still older than ${after.newest?.file}: no test was run.`)
    process.exit(1)
  }
  console.log(`rebuilt ${after.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
}

/** Which addon file the JS tests load, as the given Node resolves it: one line for the log. */
function loadedAddon(bin) {
  const probe = spawnSync(bin, ['-e', `require(${JSON.stringify(path.join(root, 'binding.js'))});
    process.stdout.write(Object.keys(require.cache).find((k) => k.endsWith('.node')) ?? '')`], { encoding: 'utf8' })
  const file = probe.stdout.trim()
  if (probe.status !== 0 || !file) {
    const err = probe.stderr.trim().split('\n').find(Boolean) ?? `exit ${probe.status}`
    return `the addon does not load: ${err}`
  }
  const local = addonState(root)
  if (file !== local.file) return `${file} (not the one built here: ${path.relative(root, local.file)})`
  const built = `${local.profile ? `${local.profile} ` : ''}build of ${clock(local.builtMs)}`
  return `${path.relative(root, file)} (${built}, ${local.stale ? `OLDER than ${local.newest.file}` : 'newer than every Rust source'})`
}

/** Runs a command in the repository; `shown` replaces its argument list in the log when that would be long. */
function run(cmd, args, shown = args.join(' ')) {
  const rel = path.relative(root, cmd)
  console.log(`\n$ ${rel && !rel.startsWith('..') ? rel : cmd} ${shown}`)
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

freshAddon()

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
  console.log(`addon: ${loadedAddon(bin)}`)
  const failuresFile = path.join(os.tmpdir(), `lockdog-test-failures-${process.pid}-${version}.txt`)
  fs.rmSync(failuresFile, { force: true })
  status = run(bin, [
    '--import', 'tsx', '--require', fileLimit, '--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000',
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    `--test-reporter=${reporter}`, `--test-reporter-destination=${failuresFile}`,
    ...suite
  ], `--import tsx --test --test-concurrency=${concurrency} … ${files.length ? suite.join(' ') : `__test__/*.test.{js,mjs,ts} (${suite.length} files)`}`) || status
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
