'use strict'
// Module-level withLock when nothing answers at REDIS_URL: prints its outcome as a JSON line.
const { withLock } = require('lockdog')

const started = Date.now()
withLock('default:key', async () => 'ran', { waitTimeout: Number(process.argv[2]) }).then(
  (value) => console.log(JSON.stringify({ value })),
  (e) => console.log(JSON.stringify({ code: e.code, message: e.message, ms: Date.now() - started })),
)
