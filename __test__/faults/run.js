#!/usr/bin/env node
'use strict'

// `npm run test:faults` — the fault-injection suite.
//   node __test__/faults/run.js [--tier short|full] [--scenario N[,M...]|soak|badinput|broken]
//                               [--topology single|redlock] [--broken MODE] [--json FILE]
// Without --scenario it runs scenarios 1–13, the broken-mode controls, the
// bad-input sweep and the soak/leak tests of the tier. Exit code 0 only when every
// row passed: "safe" rows with no violation, "unsafe" rows (the known Redlock
// hazard, every broken build) with the violation the checker must see.

const fs = require('node:fs')
const path = require('node:path')
const { runScenario, scenarios } = require('./scenarios')
const { brokenControls, BROKEN_MODES, brokenEnv } = require('./broken')

function args() {
  const a = process.argv.slice(2)
  const o = { tier: 'short', scenario: null, topology: null, broken: null, json: null }
  for (let i = 0; i < a.length; i++) {
    const k = a[i].replace(/^--/, '')
    const v = a[i + 1]
    if (k === 'tier' || k === 'scenario' || k === 'topology' || k === 'broken' || k === 'json') {
      o[k] = v
      i++
    } else if (a[i] === '-h' || a[i] === '--help') {
      console.log('usage: node __test__/faults/run.js [--tier short|full] [--scenario N|soak|badinput|broken] [--topology single|redlock] [--broken MODE] [--json FILE]')
      process.exit(0)
    } else throw new Error(`unknown argument ${a[i]}`)
  }
  if (!['short', 'full'].includes(o.tier)) throw new Error('--tier is short or full')
  return o
}

function line(r) {
  const lat = r.lossLatency && r.lossLatency.n ? `${r.lossLatency.p50}/${r.lossLatency.p99}` : '–'
  return `${r.pass ? 'PASS' : 'FAIL'} ${String(r.id).padEnd(9)} ${r.topology.padEnd(8)} ${(r.expect || '').padEnd(7)} ops=${r.ops ?? '–'} overlaps=${r.overlapsSeen ?? r.overlaps ?? '–'}${r.overlapsExcused ? ` (${r.overlapsExcused} excused: inside the window after ${r.excusedBy || 'the fault'}, ${r.overlapsUnreported ? `${r.overlapsUnreported} NOT reported` : 'each reported'} to the earlier holder)` : ''} lostUpdates=${r.lostUpdates ?? '–'} lossLatency p50/p99=${lat} ms  ${r.name}${r.broken ? ` [broken: ${r.broken}]` : ''}${r.violations.length ? `\n      ${r.violations.join('\n      ')}` : ''}${r.notes && r.notes.length ? `\n      note: ${r.notes.join('\n      note: ')}` : ''}`
}

async function main() {
  const o = args()
  const t0 = performance.now()
  const rows = []
  const env = o.broken ? brokenEnv(o.broken) : {}
  const report = (rs) => {
    for (const r of rs) {
      if (o.broken && r.expect === 'safe') {
        // Under a broken build, a scenario that exposes the mode must fail.
        r.expect = 'unsafe'
        r.broken = o.broken
        r.pass = r.violations.some((v) => /^overlap|^lost updates|^validity|still believed|never told/.test(v))
      }
      rows.push(r)
      console.log(line(r))
    }
  }
  const which = o.scenario ? o.scenario.split(',') : [...scenarios.map((s) => String(s.id)), 'broken', 'badinput', 'soak']
  for (const w of which) {
    if (/^\d+$/.test(w)) report(await runScenario(Number(w), { tier: o.tier, env, topology: o.topology }))
    else if (w === 'broken') report(await brokenControls({ tier: o.tier, only: o.broken }))
    else if (w === 'badinput') report([await require('./badinput').sweepRow()])
    else if (w === 'soak') report(await require('./soak').soakRows(o.tier))
    else throw new Error(`unknown scenario ${w}`)
  }
  const seconds = Math.round((performance.now() - t0) / 1000)
  const failed = rows.filter((r) => !r.pass)
  console.log(`\nfault suite, tier ${o.tier}, node ${process.version}, ${seconds} s`)
  console.log(`faults: ${rows.length - failed.length} passed, ${failed.length} failed`)
  if (o.json) fs.writeFileSync(path.resolve(o.json), JSON.stringify({ tier: o.tier, node: process.version, seconds, command: `node __test__/faults/run.js ${process.argv.slice(2).join(' ')}`, rows }, (k, v) => (k === 'intervals' ? undefined : v), 2))
  process.exitCode = failed.length ? 1 : 0
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e)
    process.exit(2)
  })
}

module.exports = { line }
