'use strict'

// A bare sequential acquire+release loop for profiling one contender:
//   node bench/profile/seq-loop.js <lockdogPath|contender> <redis url> [seconds]
// e.g. under `node --cpu-prof` or `perf stat -e task-clock,context-switches -- node ...`.

const path = require('node:path')
const { contenders } = require('../contenders')

async function main() {
  const [name = 'lockdog', url, seconds = '5', lockdogPath = path.resolve(__dirname, '..', '..')] = process.argv.slice(2)
  const c = await contenders[name].create({ urls: [url], ttl: 30000, wait: null, renew: false, lockdogPath })
  const end = Date.now() + Number(seconds) * 1000
  let n = 0
  const t0 = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()
  while (Date.now() < end && n < 1e6) {
    await c.release(await c.acquire('profile:seq'))
    n++
  }
  const ns = Number(process.hrtime.bigint() - t0)
  const cpu = process.cpuUsage(cpu0)
  console.log(JSON.stringify({ name, pairs: n, usPerPair: ns / 1000 / n, cpuUsPerPair: (cpu.user + cpu.system) / n }))
  await c.close()
}
main()
