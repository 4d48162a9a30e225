'use strict'

// The CLI tests once more, on a pseudo-terminal: every process of the run is then
// in a terminal's foreground process group, as under `npm test` in a real
// terminal. A signal forwarded by PID that a terminal session swallowed would
// hang a test here instead of in a developer's terminal.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const haveScript = spawnSync('script', ['--version']).status === 0

test('the CLI tests pass on a pseudo-terminal (script -qec)', { skip: !haveScript && 'needs script(1) for a pty', timeout: 300_000 }, async () => {
  const cmd = `exec '${process.execPath}' --test --test-reporter=dot '${path.join(__dirname, 'cli.test.js')}'`
  const term = spawn('script', ['-q', '-e', '-c', cmd, '/dev/null'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  term.stdout.on('data', (d) => { out += d })
  term.stderr.on('data', (d) => { out += d })
  let timer
  const code = await Promise.race([
    new Promise((resolve) => term.on('close', (c) => resolve(c))),
    new Promise((resolve) => { timer = setTimeout(() => resolve('hung'), 240_000) }),
  ])
  clearTimeout(timer)
  if (code === 'hung') term.kill('SIGKILL')
  assert.equal(code, 0, out.slice(-4000))
})
