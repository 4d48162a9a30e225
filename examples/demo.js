'use strict'
// `npm run demo`: the order-payment scenario. Several worker processes race for
// `order:1001:pay`; each payment takes twice the lock's TTL. You see one holder
// at a time, the lock's remaining validity falling between samples and jumping
// back up where the native watchdog renewed it, and clean releases.
// Uses REDIS_URL when set, else a throwaway local redis-server. Fits 80 columns.

const { spawn } = require('node:child_process')
const path = require('node:path')
const { LockClient } = require('..')
const { startRedis, redisServerAvailable, BIN } = require('../scripts/local-redis')

const WORKERS = 4
const TTL = 1500
const JOB_MS = 3000

const t0 = performance.timeOrigin + performance.now()
const stamp = (t) => `${((t - t0) / 1000).toFixed(2).padStart(6)}s`

function runWorker(url, name, onEvent) {
  const child = spawn(process.execPath, [path.join(__dirname, 'demo-worker.js'), url, name, TTL, JOB_MS], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let rest = ''
  child.stdout.on('data', (d) => {
    rest += d
    let i
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i)
      rest = rest.slice(i + 1)
      try {
        onEvent(JSON.parse(line))
      } catch {
        console.log(line)
      }
    }
  })
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)))
}

async function main() {
  let server = null
  let url = process.env.REDIS_URL
  if (!url) {
    if (!redisServerAvailable()) {
      console.error(`No REDIS_URL is set and no redis-server was found (${BIN}).\n` +
        'Install it (Debian/Ubuntu: apt-get install redis-server;\n' +
        'macOS: brew install redis) or set REDIS_URL=redis://host:port.')
      process.exit(1)
    }
    server = await startRedis()
    url = server.url
    // Ctrl-C, a closed pipe or a crash must not leave the server running.
    const stopServer = () => server.proc?.exitCode === null && server.proc.kill('SIGKILL')
    process.on('exit', stopServer)
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => process.exit(130))
    process.stdout.on('error', () => process.exit(1))
    console.log(`Started a throwaway redis-server on 127.0.0.1:${server.port} (pid ${server.pid}).`)
  } else {
    console.log(`Using REDIS_URL=${url.replace(/\/\/[^@]*@/, '//***@')}`)
  }
  console.log(`${WORKERS} workers race for "order:1001:pay" with a ${TTL} ms TTL;`)
  console.log(`each payment takes ${JOB_MS} ms, twice the TTL. The watchdog renews every`)
  console.log(`${Math.round(TTL / 3)} ms; "renewed" marks a sample taken after a renewal.\n`)

  let holders = 0
  let maxHolders = 0
  let payments = 0
  let renewals = 0
  let failures = 0
  const lastRenewed = new Map()
  const onEvent = (e) => {
    const who = e.name.padEnd(8)
    switch (e.event) {
      case 'waiting':
        console.log(`${stamp(e.t)} ${who} waiting for the lock`)
        break
      case 'acquired':
        holders++
        maxHolders = Math.max(maxHolders, holders)
        lastRenewed.set(e.name, e.renewed)
        console.log(`${stamp(e.t)} ${who} ACQUIRED, token ${e.token.slice(0, 8)}…, ` +
          `${e.attempts} attempt(s); holders: ${holders}`)
        break
      case 'working':
      {
        const renewed = e.renewed - (lastRenewed.get(e.name) ?? e.renewed)
        lastRenewed.set(e.name, e.renewed)
        const mark = renewed > 0 ? '  renewed' : ''
        console.log(`${stamp(e.t)} ${who}   paying; lock valid ${String(e.remaining).padStart(4)} ms more${mark}`)
      }
        break
      case 'releasing':
        holders--
        payments++
        break
      case 'released':
        renewals += e.renewed
        console.log(`${stamp(e.t)} ${who} released after ${e.renewed} native renewals`)
        break
      case 'failed':
        failures++
        console.log(`${stamp(e.t)} ${who} FAILED ${e.code}: ${e.message}`.slice(0, 80))
        break
      default:
    }
  }
  const codes = await Promise.all(Array.from({ length: WORKERS }, (_, i) => runWorker(url, `worker ${i + 1}`, onEvent)))

  const check = new LockClient({ url })
  const free = await check.tryAcquire('order:1001:pay', { ttl: 1000 })
  if (free) await free.release()
  await check.close()

  console.log('\nSummary')
  console.log(`  payments completed:        ${payments} of ${WORKERS}`)
  console.log(`  most holders at one time:  ${maxHolders}`)
  console.log(`  watchdog renewals:         ${renewals} (every ttl/3 = ${Math.round(TTL / 3)} ms, on Rust threads)`)
  console.log(`  lock free afterwards:      ${free ? 'yes' : 'NO'}`)
  if (server) {
    const pid = server.pid
    await server.stop()
    console.log(`Stopped the throwaway redis-server (pid ${pid}).`)
  }
  const ok = failures === 0 && payments === WORKERS && maxHolders === 1 && free && codes.every((c) => c === 0)
  if (!ok) process.exitCode = 1
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
