'use strict'

// Turns a `run.js --json FILE` result into the markdown table of FAULTS.md:
//   node __test__/faults/report.js FILE

const rows = require(require('node:path').resolve(process.argv[2])).rows

const lat = (r) => (r.lossLatency && r.lossLatency.n ? `${r.lossLatency.p50} / ${r.lossLatency.p99} (n=${r.lossLatency.n})` : '–')
const ov = (r) => {
  if (r.overlapsSeen === undefined) return '–'
  if (r.overlapsSeen !== r.overlaps) return `${r.overlaps} (+${r.overlapsSeen - r.overlaps} excused)`
  return String(r.overlapsSeen)
}
const extra = (r) => {
  const x = []
  if (r.recoveryMs) x.push(`recovery ${r.recoveryMs.join('/')} ms`)
  if (r.nextAcquireMs) x.push(Object.entries(r.nextAcquireMs).map(([k, v]) => `${k}→next acquire ${v.join('/')} ms`).join(', '))
  if (r.heldDuringBlockMs) x.push(`key kept ${r.heldDuringBlockMs.join('/')} ms of maxHold ${r.maxHold} while blocked ${r.blockMs} ms`)
  if (r.slowValidityMs && r.slowValidityMs.n) x.push(`near-TTL grants: ${r.slowValidityMs.n}, validity p50 ${r.slowValidityMs.p50} ms; refused too late: ${r.refusedTooLate}`)
  if (r.deletions) x.push(`${r.deletions} deletions`)
  if (r.flushes) x.push(`${r.flushes} SCRIPT FLUSH, ${r.restarts} restarts`)
  if (r.kills) x.push(`${r.kills} kills/cuts, losses ${r.losses}`)
  if (r.holdersTold !== undefined) x.push(`holders told ${r.holdersTold}`)
  if (r.errorCodes && r.errorCodes.length) x.push(`errors: ${r.errorCodes.join(', ')}`)
  if (r.detail && r.detail.rssGrowthMb !== undefined) x.push(`RSS ${r.detail.rssStartMb}→${r.detail.rssEndMb} MB (+${r.detail.rssGrowthMb}), ${r.detail.opsPerSecond}/s, handles ${r.detail.handlesBefore.length}→${r.detail.handlesAfter.length}`)
  if (r.detail && r.detail.renewed !== undefined) x.push(`renewals ${r.detail.renewed}/${r.detail.expectedRenewals}, still held ${r.detail.stillHeld}, min remaining ${r.detail.minRemainingMs} ms, released ${r.detail.released}, lost ${r.detail.lost}`)
  if (r.cases) x.push(`${r.cases} cases`)
  if (r.notes && r.notes.length) x.push(r.notes.join('; '))
  if (r.expect === 'unsafe') x.push(`caught: ${r.violations.filter((v) => /^overlap|^lost|^validity|believed|never told/.test(v)).map((v) => v.split(' (')[0].split(';')[0]).slice(0, 2).join('; ')}`)
  return x.join('; ')
}

console.log('| # | scenario | topology | expect | result | operations | overlaps | lost updates | loss-signal latency p50 / p99 ms | notes |')
console.log('|---|---|---|---|---|---|---|---|---|---|')
for (const r of rows) {
  console.log(`| ${r.id} | ${r.name.replace(/\|/g, '/')} | ${r.topology} | ${r.expect} | ${r.pass ? 'pass' : '**FAIL**'} | ${r.ops ?? '–'} | ${ov(r)} | ${r.lostUpdates ?? '–'} | ${lat(r)} | ${extra(r).replace(/\|/g, '/')} |`)
}
