#!/usr/bin/env node
'use strict'

// SVG bar chart of bench/results/latest.json, no dependencies:
//   node bench/chart.js [in.json] [out.svg]

const fs = require('node:fs')
const path = require('node:path')

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const COLORS = { lockdog: '#d9480f', peer: '#4c6ef5', floor: '#868e96' }

function panels(report) {
  const R = report.results
  const out = []
  const simple = (sk, title, key, unit, lowerBetter) => {
    if (!R[sk]) return
    const bars = Object.entries(R[sk])
      .filter(([name]) => name !== 'redis-benchmark' || key === 'meanUs')
      .map(([name, r]) => ({ name, label: r.label, kind: r.kind, value: r.median[key] }))
      .filter((b) => typeof b.value === 'number')
    out.push({ title, unit, lowerBetter, bars })
  }
  simple('s1', '1. Sequential acquire+release (mean µs per pair; redis-benchmark: one SET)', 'meanUs', 'µs', true)
  simple('s2', `2. ${report.settings.s2.workers} workers, distinct keys (pairs/s)`, 'opsPerSec', '/s', false)
  simple('s3', `3. Contention, ${report.settings.s3.workers} workers on one key, same polling settings (critical sections/s)`, 'csPerSec', '/s', false)
  if (report.settings.s6) simple('s6', `6. Contention, ${report.settings.s6.workers} workers on one key, each library's defaults (critical sections/s)`, 'csPerSec', '/s', false)
  if (R.s4) {
    const counts = report.settings.nodeCounts
    const last = counts[counts.length - 1]
    out.push({
      title: `4. Redlock on ${last} nodes (mean µs per pair)`,
      unit: 'µs',
      lowerBetter: true,
      bars: Object.entries(R.s4)
        .filter(([, r]) => r.median[last])
        .map(([name, r]) => ({ name, label: r.label, kind: r.kind, value: r.median[last].meanUs })),
    })
  }
  simple('s5', `5. ${report.settings.s5.locks} locks under auto-renewal (main-thread CPU % of a core)`, 'mainThreadCpuPct', '%', true)
  for (const p of out) p.bars.sort((a, b) => (p.lowerBetter ? a.value - b.value : b.value - a.value))
  return out
}

function render(report) {
  const W = 900
  const labelW = 300
  const barH = 18
  const gap = 5
  const plotW = W - labelW - 90
  let y = 50
  const parts = []
  const m = report.machine
  parts.push(`<text x="16" y="24" font-size="16" font-weight="bold">lockdog benchmark</text>`)
  parts.push(`<text x="16" y="42" font-size="11" fill="#555">${esc(`${m.cpuModel}, ${m.cores} cores · Node ${m.node} · Redis ${m.redis} · ${m.date.slice(0, 10)} · medians of ${report.settings.rounds} rounds`)}</text>`)
  for (const p of panels(report)) {
    y += 26
    parts.push(`<text x="16" y="${y}" font-size="13" font-weight="bold">${esc(p.title)}${p.lowerBetter ? ' — lower is better' : ' — higher is better'}</text>`)
    y += 8
    const max = Math.max(...p.bars.map((b) => b.value), 1e-9)
    for (const b of p.bars) {
      const w = Math.max(1, (b.value / max) * plotW)
      parts.push(`<text x="${labelW - 8}" y="${y + barH - 5}" font-size="11" text-anchor="end"${b.kind === 'lockdog' ? ' font-weight="bold"' : ''}>${esc(b.label)}</text>`)
      parts.push(`<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[b.kind] || COLORS.peer}"/>`)
      const v = b.value >= 100 ? Math.round(b.value).toLocaleString('en-US') : b.value.toFixed(b.value >= 10 ? 1 : 2)
      parts.push(`<text x="${labelW + w + 5}" y="${y + barH - 5}" font-size="11">${esc(`${v} ${p.unit}`)}</text>`)
      y += barH + gap
    }
  }
  y += 16
  parts.push(`<text x="16" y="${y}" font-size="10" fill="#555">orange: lockdog · blue: peer libraries · grey: floor (no library)</text>`)
  y += 10
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="Helvetica, Arial, sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n${parts.join('\n')}\n</svg>\n`
}

function writeChart(inFile, outFile) {
  const report = JSON.parse(fs.readFileSync(inFile, 'utf8'))
  fs.writeFileSync(outFile, render(report))
}

if (require.main === module) {
  const dir = path.join(__dirname, 'results')
  writeChart(process.argv[2] || path.join(dir, 'latest.json'), process.argv[3] || path.join(dir, 'chart.svg'))
}

module.exports = { writeChart, render }
