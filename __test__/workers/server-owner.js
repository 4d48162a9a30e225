'use strict'
// Starts two redis-servers through scripts/local-redis, prints their PIDs and
// folders, then waits (`wait`) to be killed, or floods stdout (`flood`) until a
// closed pipe (EPIPE) crashes it.
const { startRedis } = require('../../scripts/local-redis')

;(async () => {
  const servers = [await startRedis(), await startRedis()]
  process.stdout.write(`${JSON.stringify({ pids: servers.map((s) => s.pid), dirs: servers.map((s) => s.dir) })}\n`)
  if (process.argv[2] === 'flood') {
    const chunk = 'x'.repeat(65536)
    // Writes until a write fails, as a program piped into `head` does; the failed
    // write's 'error' (EPIPE) is not handled, so it ends the process.
    const again = (err) => err || process.stdout.write(chunk, again)
    setTimeout(again, 200)
  } else setInterval(() => {}, 1000)
})()
