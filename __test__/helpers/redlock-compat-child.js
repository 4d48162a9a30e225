'use strict'

// Runs one contended acquire with no 'error' listener left on the Redlock:
// `node redlock-compat-child.js <redlock|lockdog side name> <port>`. Prints the
// outcome; a crash shows in the exit code.

const Redis = require('ioredis')

const [name, port] = process.argv.slice(2)
const mod = name.startsWith('redlock@') ? require('redlock') : require('lockdog/redlock')
const Redlock = mod.default

async function main() {
  const redis = new Redis({ host: '127.0.0.1', port: Number(port) })
  await redis.set('{redlock}crash', 'someone else', 'PX', 10000)
  const redlock = new Redlock([redis], { retryCount: 1, retryDelay: 10 })
  redlock.removeAllListeners('error')
  // A deadline: an acquire that never settles must not keep this process alive.
  const timer = setTimeout(() => {
    console.log('never settled')
    process.exit(3)
  }, 5000)
  try {
    await redlock.acquire(['{redlock}crash'], 1000)
    console.log('resolved')
  } catch (e) {
    console.log(`rejected ${e.name}`)
  }
  clearTimeout(timer)
  await redis.del('{redlock}crash')
  await redlock.quit()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
