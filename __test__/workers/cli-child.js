'use strict'

// A command for `lockdog exec` in __test__/cli.test.js.
//
//   cli-child.js hold MARKER [--trap SIG:CODE]... [--ignore SIG]...
//     installs its signal handlers, prints {"ready":true,pid,key,fence} and runs
//     until the file MARKER exists (then exits 0). A trapped signal prints
//     {"signal":SIG} and exits CODE; an ignored one prints {"ignored":SIG}.
//   cli-child.js append FILE ID MS
//     appends "ID start T", stays MS ms, appends "ID end T" (T: the monotonic
//     clock in ns, shared by every process on the machine).

const fs = require('node:fs')

const [mode, ...args] = process.argv.slice(2)
const out = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`)

if (mode === 'hold') {
  const marker = args[0]
  for (let i = 1; i < args.length; i += 2) {
    if (args[i] === '--trap') {
      const [sig, code] = args[i + 1].split(':')
      process.on(sig, () => {
        out({ signal: sig })
        process.exit(Number(code))
      })
    } else if (args[i] === '--ignore') {
      const sig = args[i + 1]
      process.on(sig, () => out({ ignored: sig }))
    }
  }
  out({ ready: true, pid: process.pid, key: process.env.LOCKDOG_KEY ?? null, fence: process.env.LOCKDOG_FENCE ?? null })
  const timer = setInterval(() => {
    if (fs.existsSync(marker)) {
      clearInterval(timer)
      out({ done: true })
    }
  }, 10)
} else if (mode === 'append') {
  const [file, id, ms] = args
  const now = () => process.hrtime.bigint().toString()
  fs.appendFileSync(file, `${id} start ${now()}\n`)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(ms))
  fs.appendFileSync(file, `${id} end ${now()}\n`)
} else {
  process.stderr.write(`cli-child.js: unknown mode ${mode}\n`)
  process.exit(2)
}
