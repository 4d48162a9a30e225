'use strict'
// Run with --expose-gc. `closed N`: N clients take and release a lock, are closed
// and dropped; `dropped N`: the same without close(). Prints how many were collected.
const { LockClient } = require('../..')
const Redis = require('ioredis')

const [url, mode, count] = process.argv.slice(2)
const n = Number(count)
let collected = 0
const registry = new FinalizationRegistry(() => { collected++ })

async function settle() {
  for (let i = 0; i < 20 && collected < n; i++) {
    global.gc()
    await new Promise((r) => setTimeout(r, 50))
  }
}

;(async () => {
  for (let i = 0; i < n; i++) {
    const c = new LockClient({ url })
    c.on('lost', () => {})
    const lock = await c.acquire(`lifetime:${mode}:${i}`, { ttl: 5000 })
    await lock.release()
    if (mode === 'closed') await c.close()
    registry.register(c, i)
  }
  await settle()
  const out = { mode, created: n, collected }
  if (mode === 'dropped') {
    // Give the native side a moment to drop its connections, then count them.
    const r = new Redis(url)
    for (let i = 0; i < 40; i++) {
      const info = await r.info('clients')
      out.connectedAfterGc = Number(/connected_clients:(\d+)/.exec(info)[1]) - 1
      if (out.connectedAfterGc < 30) break
      global.gc()
      await new Promise((res) => setTimeout(res, 50))
    }
    r.disconnect()
    out.exitBy = 'event loop empty'
  }
  console.log(JSON.stringify(out))
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
