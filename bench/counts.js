'use strict'

// Per-pair counts that do not depend on how loaded the machine is, from a bench
// build of the addon (cargo feature `bench-counts`: a counting allocator):
//   - JS → native calls per acquire+release (every method and accessor of the
//     binding's classes, counted by wrapping them in this process only);
//   - heap allocations (and reallocations) per pair in the addon's Rust code,
//     on every thread (the JS thread's and the runtime's; V8's own are not
//     counted).
// Sequentially on one key, and with 64 concurrent loops on their own keys, on
// one throwaway redis-server.
//
//   node bench/counts.js [--pairs N] [--addon FILE.node]
//
// Without --addon it builds the bench build (`cargo build --release --features
// bench-counts`) into $TMPDIR/lockdog-bench-counts-target.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { prepareAddon, cargoBuild, ROOT } = require('./lib/addon')
const { startRedis } = require('../scripts/local-redis')


function option(name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback
}

function buildCounting() {
  const targetDir = path.join(os.tmpdir(), 'lockdog-bench-counts-target')
  console.log(`building the bench build (feature bench-counts) into ${targetDir} ...`)
  const file = path.join(targetDir, 'lockdog.bench-counts.node')
  fs.copyFileSync(cargoBuild({ targetDir, features: ['bench-counts'] }), file)
  return file
}

/** Counts every call of the binding classes' methods and accessors and of its functions (JS → native). */
function countCalls(binding) {
  const counter = { calls: 0, byName: new Map() }
  for (const cls of ['NativeClient', 'CancelHandle']) {
    const proto = binding[cls] && binding[cls].prototype
    if (!proto) continue
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor') continue
      const d = Object.getOwnPropertyDescriptor(proto, name)
      const tally = () => {
        counter.calls++
        const k = `${cls}.${name}`
        counter.byName.set(k, (counter.byName.get(k) || 0) + 1)
      }
      if (typeof d.value === 'function') {
        const f = d.value
        d.value = function (...args) {
          tally()
          return f.apply(this, args)
        }
      } else {
        if (d.get) {
          const g = d.get
          d.get = function () {
            tally()
            return g.call(this)
          }
        }
        if (d.set) {
          const s = d.set
          d.set = function (v) {
            tally()
            return s.call(this, v)
          }
        }
      }
      Object.defineProperty(proto, name, d)
    }
  }
  // The lock's functions (a lock is an id; lib/lock.js calls these on the module).
  const counted = (name, f) =>
    function (...args) {
      counter.calls++
      counter.byName.set(name, (counter.byName.get(name) || 0) + 1)
      return f.apply(this, args)
    }
  for (const name of Object.keys(binding)) {
    const f = binding[name]
    if (typeof f !== 'function' || /^[A-Z]/.test(name) || name === 'benchCounts') continue
    binding[name] = counted(name, f)
  }
  // The JS thread's own acquire and release (lib/ asks for them once, when it loads).
  const hotCalls = binding.hotCalls
  if (hotCalls) {
    binding.hotCalls = function () {
      const calls = hotCalls.call(this)
      for (const name of Object.keys(calls)) calls[name] = counted(`hotCalls().${name}`, calls[name])
      return calls
    }
  }
  return counter
}

async function measure(label, client, binding, counter, pairs, loops) {
  const c0 = binding.benchCounts()
  const before = { allocs: c0.allocations, reallocs: c0.reallocations, calls: counter.calls }
  counter.byName.clear()
  let left = pairs
  await Promise.all(
    Array.from({ length: loops }, async (_, w) => {
      const key = `bench:counts:${label}:${w}`
      while (left > 0) {
        left--
        const lock = await client.acquire(key)
        await lock.release()
      }
    }),
  )
  await client.settled()
  const c1 = binding.benchCounts()
  const allocs = c1.allocations - before.allocs
  const reallocs = c1.reallocations - before.reallocs
  const calls = counter.calls - before.calls
  const names = [...counter.byName].map(([k, v]) => `${k} ${(v / pairs).toFixed(2)}`).join(', ')
  return { label, pairs, callsPerPair: calls / pairs, allocationsPerPair: allocs / pairs, reallocationsPerPair: reallocs / pairs, calls: names }
}

async function main() {
  const pairs = Number(option('--pairs', '20000'))
  const addonFile = option('--addon', null) || buildCounting()
  const addon = prepareAddon({ mode: addonFile, log: () => {} })
  const server = await startRedis()
  try {
    const binding = require(path.join(addon.path, 'binding.js'))
    if (typeof binding.benchCounts !== 'function') throw new Error(`${addonFile} is not a bench build (no benchCounts)`)
    const counter = countCalls(binding)
    const { LockClient } = require(addon.path)
    const client = new LockClient({ url: server.url })
    try {
      // Warm: connections open, scripts loaded, code paths taken once.
      await measure('warm', client, binding, counter, 2000, 64)
      const rows = [
        await measure('sequential', client, binding, counter, pairs, 1),
        await measure('64 keys', client, binding, counter, pairs, 64),
      ]
      console.log(`\nlockdog ${addon.commit}${addon.dirty ? ' + uncommitted changes' : ''}, fast path ${client.fastPath}, ${pairs} pairs each\n`)
      console.log('| loops | JS → native calls per pair | Rust heap allocations per pair | reallocations per pair | calls |')
      console.log('|:--|--:|--:|--:|:--|')
      for (const r of rows) {
        console.log(`| ${r.label} | ${r.callsPerPair.toFixed(2)} | ${r.allocationsPerPair.toFixed(1)} | ${r.reallocationsPerPair.toFixed(1)} | ${r.calls} |`)
      }
    } finally {
      await client.close()
    }
  } finally {
    await server.stop()
    addon.cleanup()
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
