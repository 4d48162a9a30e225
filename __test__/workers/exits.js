'use strict'

// Uses a client and then leaves the process to end by itself: with `close`, after
// closing it; with `open`, with the client still open and never closed.
const { LockClient } = require('../..')

const [url, mode] = process.argv.slice(2)

async function main() {
  const locks = new LockClient({ url })
  await locks.withLock(`exits:${mode}`, async () => {}, { ttl: 2000 })
  if (mode === 'close') await locks.close()
  console.log(JSON.stringify({ done: mode }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
