'use strict'

// A bare acquire+release loop for profiling one contender, sequential or with
// concurrent loops on keys of their own:
//   node bench/profile/seq-loop.js <contender> <redis url> [seconds] [lockdogPath] [loops]
// e.g. under `node --cpu-prof`, `perf record -g` or `perf stat -e task-clock,context-switches -- node ...`.
// Prints pairs/s, and the process's and the JS thread's CPU per pair.

const path = require('node:path')
const { contenders } = require('../contenders')

async function main() {
  const [name = 'lockdog', url, seconds = '5', lockdogPath = path.resolve(__dirname, '..', '..'), loops = '1'] = process.argv.slice(2)
  const c = await contenders[name].create({ urls: [url], ttl: 30000, wait: null, renew: false, lockdogPath: path.resolve(lockdogPath) })
  const end = Date.now() + Number(seconds) * 1000
  let n = 0
  const t0 = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()
  const js0 = process.threadCpuUsage ? process.threadCpuUsage() : null
  await Promise.all(
    Array.from({ length: Number(loops) }, async (_, w) => {
      const key = `profile:loop:${w}`
      while (Date.now() < end && n < 1e7) {
        await c.release(await c.acquire(key))
        n++
      }
    }),
  )
  const ns = Number(process.hrtime.bigint() - t0)
  const cpu = process.cpuUsage(cpu0)
  const js = js0 ? process.threadCpuUsage(js0) : null
  console.log(JSON.stringify({
    name,
    loops: Number(loops),
    pairs: n,
    pairsPerSec: Math.round((n * 1e9) / ns),
    cpuUsPerPair: +((cpu.user + cpu.system) / n).toFixed(2),
    jsUsPerPair: js ? +((js.user + js.system) / n).toFixed(2) : null,
  }))
  await c.close()
}
main()
