'use strict'

// Takes and releases locks through the fast path (its connection up first),
// then leaves the process to end by itself: with `close` after closing the
// client, with `open` with the client never closed. With `waits` it first
// waits for a key another owner holds for 600 ms (no release notice: only
// its retry timers on the JS thread's loop, which nothing else keeps alive,
// get it the key) and says after how many attempts.
const Redis = require('ioredis')
const { LockClient } = require('../..')

const [url, mode] = process.argv.slice(2)

async function main() {
  const locks = new LockClient({ url })
  const probe = new Redis(url)
  const deadline = Date.now() + 10000
  for (;;) {
    await (await locks.acquire(`fast-exits:${mode}`, { ttl: 2000 })).release()
    const list = await probe.client('LIST')
    if (list.includes('name=lockdog-fast')) break
    if (Date.now() > deadline) throw new Error('no fast connection within 10 s')
    await new Promise((r) => setTimeout(r, 20))
  }
  if (mode === 'waits') await probe.set(`fast-exits:${mode}`, 'another owner', 'PX', 600)
  probe.disconnect()
  const lock = await locks.acquire(`fast-exits:${mode}`, { ttl: 2000, waitTimeout: 10000 })
  await lock.release()
  if (mode !== 'open') await locks.close()
  console.log(JSON.stringify({ done: mode, attempts: lock.attempts }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
