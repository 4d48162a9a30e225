'use strict'

// Builds of the addon (and raw ioredis) side by side on one server, interleaved
// round by round: pairs/s, the JS thread's CPU and the server's CPU (INFO cpu)
// per acquire+release pair, and the medians.
//   node bench/profile/ab.js <redis url> [--loops 64] [--rounds 3] [--seconds 3] name=file.node ... [floor]
// e.g. node bench/profile/ab.js redis://127.0.0.1:7000 before=/tmp/a.node after=/tmp/b.node floor
// (a `.node` file of another build, e.g. another checkout's; `floor` is raw ioredis).

const { spawnSync } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')

function option(args, name, fallback) {
  const i = args.indexOf(name)
  if (i < 0) return fallback
  const [, value] = args.splice(i, 2)
  return Number(value)
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function serverCpu(redis) {
  const info = await redis.info('cpu')
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0)
  return field('used_cpu_sys') + field('used_cpu_user')
}

async function main() {
  const args = process.argv.slice(2)
  const loops = option(args, '--loops', 64)
  const rounds = option(args, '--rounds', 3)
  const seconds = option(args, '--seconds', 3)
  const [url, ...specs] = args
  if (!url || !specs.length) {
    console.error('usage: node bench/profile/ab.js <redis url> [--loops N] [--rounds N] [--seconds N] name=file.node ... [floor]')
    process.exit(2)
  }
  const redis = new Redis(url)
  const seen = new Map()
  for (let round = 1; round <= rounds; round++) {
    for (const spec of specs) {
      const [name, file] = spec.includes('=') ? spec.split('=') : [spec, null]
      const cpu0 = await serverCpu(redis)
      const r = spawnSync(process.execPath, [
        path.join(__dirname, 'seq-loop.js'), file ? 'lockdog' : 'floor', url, String(seconds), path.join(__dirname, '..', '..'), String(loops),
      ], { encoding: 'utf8', env: file ? { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: path.resolve(file) } : process.env })
      if (r.status !== 0) throw new Error(`${name}: ${r.stderr}`)
      const out = JSON.parse(r.stdout.trim().split('\n').pop())
      const row = {
        pairsPerSec: out.pairsPerSec,
        jsUsPerPair: out.jsUsPerPair,
        serverUsPerPair: +(((await serverCpu(redis)) - cpu0) * 1e6 / out.pairs).toFixed(2),
      }
      console.log(`round ${round} ${name}: ${JSON.stringify(row)}`)
      if (!seen.has(name)) seen.set(name, [])
      seen.get(name).push(row)
    }
  }
  for (const [name, rows] of seen) {
    const m = (k) => median(rows.map((r) => r[k]))
    console.log(`median ${name}: ${m('pairsPerSec')} pairs/s, JS ${m('jsUsPerPair')} µs, server ${m('serverUsPerPair')} µs a pair`)
  }
  redis.disconnect()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
