'use strict'

// `lockdog status` and `lockdog release --force`: operators' commands.

const { EXIT, usage, say, exit, usageExit, quote, failure, makeClient, closeQuietly, UNAVAILABLE } = require('./common')

function operandKeys(sub, opts, operands) {
  const keys = [...(opts.key ?? []), ...operands]
  if (keys.length === 0) throw usage(`${sub}: missing the lock key (lockdog ${sub} KEY...)`)
  for (const k of keys) if (k === '') throw usage(`${sub}: a lock key must not be empty`)
  return keys
}

async function runOnClient(sub, opts, what, fn) {
  const locks = makeClient(opts)
  try {
    return await fn(locks)
  } catch (e) {
    await closeQuietly(locks)
    const [code, message] = failure(e)
    if (code === EXIT.USAGE) return usageExit(message, sub)
    say(code === EXIT.UNAVAILABLE ? `cannot ${what}: ${message}` : message)
    return exit(code)
  } finally {
    await closeQuietly(locks)
  }
}

async function status(opts, operands) {
  const keys = operandKeys('status', opts, operands)
  const results = await runOnClient('status', opts, `inspect ${keys.map(quote).join(', ')}`, (locks) => Promise.all(keys.map((k) => locks.inspect(k))))
  let out = ''
  for (let i = 0; i < keys.length; i++) {
    const r = results[i]
    if (opts.json) {
      out += `${JSON.stringify({ key: keys[i], held: r.held, remainingMs: r.remainingMs, holder: r.holder, fence: r.fence })}\n`
    } else if (r.held) {
      const parts = [`${r.remainingMs ?? '?'} ms left`, `holder ${r.holder}`]
      if (r.fence != null) parts.push(`fence ${r.fence}`)
      out += `${keys[i]}: held (${parts.join(', ')})\n`
    } else {
      out += `${keys[i]}: free${r.fence != null ? ` (fence ${r.fence})` : ''}\n`
    }
  }
  process.stdout.write(out)
  return exit(results.some((r) => r.held) ? EXIT.HELD : EXIT.OK)
}

async function release(opts, operands) {
  const keys = operandKeys('release', opts, operands)
  if (!opts.force) {
    throw usage(
      `release: refusing to delete ${keys.map(quote).join(', ')} without --force. Forcing a release is unsafe: ` +
        'the holder is not told and may still be working. (Locks taken by `lockdog exec` are released when the command exits.)',
    )
  }
  const out = await runOnClient('release', opts, `release ${keys.map(quote).join(', ')}`, async (locks) => {
    const total = locks.nodes.length
    let text = ''
    for (const key of keys) {
      const n = await locks.forceRelease(key)
      // forceRelease needs a quorum of answers; confirm that a quorum sees the lock free.
      let after
      try {
        after = await locks.inspect(key)
      } catch (e) {
        if (e && UNAVAILABLE.has(e.code)) {
          e.message = `the key was deleted on ${n} of ${total} node(s), but too few nodes answered to confirm that the lock is free: ${e.message}`
        }
        throw e
      }
      const again = after.held ? ` It is held again, by ${after.holder}.` : ''
      const nodes = `${total} node${total === 1 ? '' : 's'}`
      if (opts.json) text += `${JSON.stringify({ key, deleted: n, nodes: total, held: after.held })}\n`
      else if (n > 0) text += `${key}: force-released (the key existed on ${n} of ${nodes}).${again}\n`
      else text += `${key}: not held (the key existed on none of ${nodes}).${again}\n`
    }
    return text
  })
  process.stdout.write(out)
  return exit(EXIT.OK)
}

module.exports = { status, release }
