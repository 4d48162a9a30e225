'use strict'

// `npm run test:runtimes`: runs the README's examples (__test__/runtimes/readme-examples.mjs:
// withLock, acquire/extend/release timed per operation, a renewed lock still held through a
// blocked event loop, a release notice, a loss, a semaphore, the redlock drop-in, the CLI) on
// Bun and Deno, each against a redis-server started here (REDIS_SERVER_BIN, else PATH) on a
// free loopback port, and for comparison on the first tested Node version found
// (scripts/node-versions.js). Bun and Deno come from
// `node scripts/runtimes.js install` (.cache/); a missing one fails the run unless
// LOCKDOG_RUNTIMES names only the others (e.g. LOCKDOG_RUNTIMES=deno).

const { spawn } = require('node:child_process')
const path = require('node:path')
const { startRedis } = require('./local-redis')
const runtimes = require('./runtimes')
const nodeVersions = require('./node-versions')

const root = path.join(__dirname, '..')
const script = path.join(root, '__test__', 'runtimes', 'readme-examples.mjs')
const cli = path.join(root, 'bin', 'lockdog.js')
const wanted = (process.env.LOCKDOG_RUNTIMES || 'node,bun,deno').split(',').filter(Boolean)

// How each runtime runs a file; the fast path only on Node (Bun and Deno lack its libuv loop).
const RUN = {
  node: { bin: () => nodeVersions.find().found[0]?.bin, args: [], fast: '1' },
  bun: { bin: () => runtimes.binOf('bun'), args: [], fast: '0' },
  deno: { bin: () => runtimes.binOf('deno'), args: ['run', '-A'], fast: '0' },
}

function run(bin, args, env) {
  return new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(bin, args, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] })
    child.on('error', (err) => resolve({ code: null, signal: null, err, ms: Date.now() - started }))
    child.on('exit', (code, signal) => resolve({ code, signal, ms: Date.now() - started }))
  })
}

async function main() {
  const unknown = wanted.filter((n) => !RUN[n])
  if (unknown.length) throw new Error(`LOCKDOG_RUNTIMES: unknown ${unknown.join(', ')}`)
  const server = await startRedis()
  const results = []
  try {
    for (const name of wanted) {
      const bin = RUN[name].bin()
      if (!bin) {
        results.push(`${name}: not installed (${name === 'node' ? 'node scripts/node-versions.js install' : `node scripts/runtimes.js install ${name}`})`)
        process.exitCode = 1
        continue
      }
      console.log(`\n== ${name} (${bin})`)
      const env = {
        ...process.env,
        REDIS_URL: server.url,
        EXPECT_FAST_PATH: process.env.LOCKDOG_FAST_PATH === '0' ? '0' : RUN[name].fast,
        LOCKDOG_CLI_RUNTIME: JSON.stringify([bin, ...RUN[name].args, cli]),
        DENO_NO_UPDATE_CHECK: '1',
        NO_COLOR: '1',
      }
      const r = await run(bin, [...RUN[name].args, script], env)
      const ok = r.code === 0
      if (!ok) process.exitCode = 1
      results.push(`${name}: ${ok ? 'passed' : `FAILED (${r.err ? r.err.message : r.signal ? `signal ${r.signal}` : `exit ${r.code}`})`} in ${r.ms} ms`)
    }
  } finally {
    await server.stop()
  }
  console.log(`\n${results.join('\n')}`)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
