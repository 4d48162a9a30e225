'use strict'

// The short tier of the fault-injection suite (__test__/faults, FAULTS.md), so
// CI runs it with `npm test`. The full tier runs on demand:
//   node __test__/faults/run.js --tier full
// Every scenario must be green where the specification says the lock is safe,
// and the checker must SEE the violation where it says it is not (a node
// restarted empty at once) and under every deliberately broken build.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { runScenario, scenarios } = require('./faults/scenarios')
const { brokenControls, ensureBrokenBuild, BROKEN_MODES } = require('./faults/broken')
const { line } = require('./faults/run')

function verdict(t, rows) {
  for (const r of rows) t.diagnostic(line(r))
  const failed = rows.filter((r) => !r.pass)
  assert.equal(failed.length, 0, failed.map((r) => `${r.id} ${r.topology} (${r.expect}) ${r.name}: ${r.violations.join('; ') || 'no violation seen where one was expected'}`).join('\n'))
}

for (const s of scenarios) {
  test(`fault scenario ${s.id}: ${s.name} (${s.topologies.join(' + ')})`, { timeout: 110_000 }, async (t) => {
    verdict(t, await runScenario(s.id, { tier: 'short' }))
  })
}

test('broken-modes build (compiled once into target/faults-broken, then cached)', { timeout: 15 * 60_000 }, (t) => {
  // On stderr at once: the runner shows diagnostics only when the test ends, and
  // the first build takes minutes.
  const log = (m) => {
    process.stderr.write(`# fault suite: ${m}\n`)
    t.diagnostic(m)
  }
  const t0 = performance.now()
  const built = ensureBrokenBuild({ log })
  log(`broken-modes variant ready in ${Math.round((performance.now() - t0) / 1000)} s: ${built}`)
})

for (const mode of [...new Set(BROKEN_MODES.map((b) => b.mode))]) {
  test(`the checker catches the broken mode ${mode}`, { timeout: 110_000 }, async (t) => {
    verdict(t, await brokenControls({ tier: 'short', only: mode }))
  })
}

test('bad-input sweep: typed errors, no crash, no hang, no key left', { timeout: 110_000 }, async (t) => {
  verdict(t, [await require('./faults/badinput').sweepRow()])
})

test('soak and leaks (short tier: 20,000 cycles, 3,000 withLock, 1,000 locks held 3 s)', { timeout: 110_000 }, async (t) => {
  verdict(t, await require('./faults/soak').soakRows('short'))
})
