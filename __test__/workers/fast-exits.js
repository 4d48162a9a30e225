'use strict'

// Takes and releases locks through the fast path (its connection up first),
// then leaves the process to end by itself: with `close` after closing the
// client, with `open` with the client never closed.
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
  probe.disconnect()
  await (await locks.acquire(`fast-exits:${mode}`, { ttl: 2000 })).release()
  if (mode === 'close') await locks.close()
  console.log(JSON.stringify({ done: mode }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
