'use strict'

// Loaded into every test file's process by scripts/test.js (--require). A test file
// that runs past LOCKDOG_TEST_FILE_LIMIT_MS (default 240 s; the slowest file takes a
// tenth of that) is stopped with a report of the tests still running and what holds
// its event loop, instead of waiting out the runner's own timeout, which names only
// the file. The runner's process itself (which runs for the whole suite) is left alone.

// Not in the worker threads a test starts: they inherit this preload with
// the environment, and node:test has no business there.
if (process.env.NODE_TEST_CONTEXT?.startsWith('child') && require('node:worker_threads').isMainThread) {
  const limit = Number(process.env.LOCKDOG_TEST_FILE_LIMIT_MS) || 240_000
  const { beforeEach, afterEach } = require('node:test')
  const running = new Map()
  const name = (t) => t.fullName ?? t.name
  beforeEach((t) => { running.set(name(t), performance.now()) })
  afterEach((t) => { running.delete(name(t)) })
  setTimeout(() => {
    const now = performance.now()
    const tests = [...running].map(([n, at]) => `  ${JSON.stringify(n)} (for ${((now - at) / 1000).toFixed(0)} s)`)
    process.stderr.write([
      `this test file still runs after ${limit / 1000} s: stopped.`,
      tests.length ? `tests still running:\n${tests.join('\n')}` : 'no test is running (something keeps the process alive after them)',
      `what holds the event loop: ${JSON.stringify(process.getActiveResourcesInfo())}`,
      '',
    ].join('\n'))
    process.exit(1)
  }, limit).unref()
}
