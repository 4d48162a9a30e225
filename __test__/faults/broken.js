'use strict'

// Negative controls: the same scenarios against the deliberately broken lock
// variants (cargo feature `broken-modes`, src/core/broken.rs). Each must be
// caught: a suite that passes them all tests nothing. The variant is built once
// (debug profile, in cargo's usual target folder, so it reuses the dependencies
// `cargo test` compiled) and copied to target/faults-broken/node (never over
// ./lockdog.linux-x64-gnu.node); it is loaded
// by the workers through NAPI_RS_NATIVE_LIBRARY_PATH; each worker checks in
// /proc/self/maps that this file is the addon it really loaded.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { runScenario } = require('./scenarios')

const ROOT = path.join(__dirname, '..', '..')
const TARGET = path.join(ROOT, 'target', 'faults-broken')
const NODE_FILE = path.join(TARGET, 'node', 'lockdog.linux-x64-gnu.node')

/** Each broken mode and the scenario that exposes it. */
const BROKEN_MODES = [
  { mode: 'plain-del', scenario: 2, topology: 'single', why: 'a holder paused past its TTL releases with a plain DEL, deleting the next holder\'s key' },
  { mode: 'extend-recreates', scenario: 9, topology: 'single', why: 'the key deleted under the holder is recreated by its renewal: it is never told' },
  { mode: 'no-drift', scenario: 7, topology: 'single', why: 'locks granted without the clock-drift allowance (validity bound)' },
  { mode: 'late-clock', scenario: 7, topology: 'single', why: 'validity counted from the reply: through latency the lock outlives its key' },
  { mode: 'swallow-failures', scenario: 9, topology: 'single', why: 'renewal failures swallowed: a holder whose key was deleted is never told' },
  { mode: 'swallow-failures', scenario: 5, topology: 'redlock', why: 'majority paused: holders are never told', fullOnly: true },
  { mode: 'sem-over-limit', scenario: 14, topology: 'single', why: 'a semaphore\'s acquire script enforces one permit too many: more than limit holders' },
  { mode: 'sem-minority-slot', scenario: 14, topology: 'redlock', why: 'on several nodes, a slot granted by a minority counts: two holders believe the same slot' },
  { mode: 'sem-over-limit', scenario: 15, topology: 'single', why: 'the same off-by-one lets one reader in beside a writer' },
  { mode: 'stale-handoff', scenario: 20, topology: 'single', why: 'a fair waiter stopped while handed the lock takes that stale hand-off after resuming, beside the waiter who took the expired key' },
  { mode: 'sem-over-limit', scenario: 21, topology: 'single', why: 'a fair semaphore\'s acquire script enforces one permit too many' },
  { mode: 'sem-over-limit', scenario: 22, topology: 'single', why: 'the same off-by-one in the fair read-write lock lets one reader in beside a writer' },
]

const STAMP = `${NODE_FILE}.sources`

/** A digest of what the addon is built from. */
function sourcesDigest() {
  const h = require('node:crypto').createHash('sha256')
  const files = []
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else files.push(p)
    }
  }
  walk(path.join(ROOT, 'src'))
  for (const f of [...files.sort(), path.join(ROOT, 'Cargo.toml'), path.join(ROOT, 'Cargo.lock'), path.join(ROOT, 'build.rs')]) {
    if (!fs.existsSync(f)) continue
    h.update(path.relative(ROOT, f))
    h.update(fs.readFileSync(f))
  }
  return h.digest('hex')
}

/** Builds the broken-modes variant if it is missing or was built from other sources. */
function ensureBrokenBuild({ log = console.log } = {}) {
  const digest = sourcesDigest()
  if (fs.existsSync(NODE_FILE) && fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8') === digest) return NODE_FILE
  log(`building the broken-modes variant into ${path.relative(ROOT, TARGET)} (once; cached after)...`)
  const napi = path.join(ROOT, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
  const r = spawnSync(process.execPath, [napi, 'build', '--platform', '--features', 'broken-modes', '--output-dir', path.join(TARGET, 'node'), '--js', 'false', '--dts', 'false'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 15 * 60 * 1000,
  })
  if (r.status !== 0 || !fs.existsSync(NODE_FILE)) throw new Error(`broken-modes build failed:\n${(r.stderr || '').slice(-3000)}`)
  fs.writeFileSync(STAMP, digest)
  return NODE_FILE
}

function brokenEnv(mode) {
  return { NAPI_RS_NATIVE_LIBRARY_PATH: ensureBrokenBuild(), LOCKDOG_BROKEN: mode }
}

/** Runs every (or one) broken-mode control; rows pass when the checker caught the mode. */
async function brokenControls({ tier = 'short', only = null } = {}) {
  const rows = []
  for (const b of BROKEN_MODES) {
    if (only && b.mode !== only) continue
    if (b.fullOnly && tier !== 'full') continue
    // A broken lock breaks when the timing lets it: a run may happen not to
    // expose it. Up to three runs; the control passes once one run is caught.
    for (let run = 1; run <= 3; run++) {
      const got = await runScenario(b.scenario, { tier, env: brokenEnv(b.mode), topology: b.topology })
      for (const r of got) {
        r.expect = 'unsafe'
        r.broken = b.mode
        r.why = b.why
        r.id = `B:${b.scenario}`
        r.name = `broken ${b.mode} → scenario ${b.scenario} (${r.name})${run > 1 ? `, run ${run}` : ''}`
        r.pass = r.violations.some((v) => /^overlap|^lost updates|^validity|still believed|never told/.test(v))
      }
      if (got.every((r) => r.pass) || run === 3) {
        rows.push(...got)
        break
      }
    }
  }
  return rows
}

// `node __test__/faults/broken.js --build`: build (or confirm) the variant, e.g. in CI before `npm test`.
if (require.main === module && process.argv[2] === '--build') console.log(ensureBrokenBuild())

module.exports = { BROKEN_MODES, brokenControls, brokenEnv, ensureBrokenBuild, NODE_FILE }
