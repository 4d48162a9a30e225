#!/usr/bin/env node
'use strict'

// lockdog: a distributed flock(1) on Redis. `lockdog exec` runs a command while
// holding a lock, `lockdog status` inspects one, `lockdog release --force`
// deletes one. This file only dispatches; the commands live in lib/cli/.
// Full reference: docs/cli.md.

const path = require('node:path')
const { EXIT, ROOT, say, exit, usageExit, failure, UsageError } = require('../lib/cli/common')
const { parse, HELP } = require('../lib/cli/args')

async function main(argv) {
  let parsed
  try {
    parsed = parse(argv)
  } catch (e) {
    if (e instanceof UsageError) return usageExit(e.message, ['exec', 'status', 'release'].includes(argv[0]) ? argv[0] : undefined)
    throw e
  }
  if (parsed.help) {
    process.stdout.write(HELP[parsed.help])
    return exit(EXIT.OK)
  }
  if (parsed.version) {
    process.stdout.write(`lockdog ${require(path.join(ROOT, 'package.json')).version}\n`)
    return exit(EXIT.OK)
  }
  const { sub, opts, operands, command } = parsed
  try {
    if (sub === 'exec') return await require('../lib/cli/exec').exec(opts, command)
    const admin = require('../lib/cli/admin')
    return await admin[sub](opts, operands)
  } catch (e) {
    const [code, message] = failure(e)
    if (code === EXIT.USAGE) return usageExit(message, sub)
    say(message)
    return exit(code)
  }
}

main(process.argv.slice(2)).catch((e) => {
  say(`internal error: ${(e && e.stack) || e}`)
  process.exit(EXIT.SOFTWARE)
})
