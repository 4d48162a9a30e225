'use strict'

// The option names JS accepts are exactly the fields of the Rust option structs
// (src/binding/options/), as the generated binding.d.ts declares them: a new
// Rust option cannot be forgotten in lib/validate.js, nor a JS name outlive its
// Rust field. The limits and defaults JS uses come from the addon.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { ACQUIRE, ACQUIRE_JS, CLIENT, CLUSTER_NODE, SENTINEL, TLS_FIELDS } = require('../lib/validate')
const binding = require('../binding.js')

const dts = fs.readFileSync(path.join(__dirname, '..', 'binding.d.ts'), 'utf8')

/** The fields of `export interface <name>` in binding.d.ts, each with its TS type. */
function fields(name) {
  const body = new RegExp(`^export interface ${name} \\{\\n([\\s\\S]*?)^\\}`, 'm').exec(dts)
  assert.ok(body, `binding.d.ts declares interface ${name}`)
  const out = {}
  for (const m of body[1].matchAll(/^ {2}(\w+)\??: (.+)$/gm)) out[m[1]] = m[2]
  assert.ok(Object.keys(out).length > 0, `interface ${name} has fields`)
  return out
}

/** How validate.js names each TS type of the binding. */
const AS_JS = {
  number: 'number',
  boolean: 'boolean',
  string: 'string',
  'Array<string>': 'string[]',
  'Array<string | ClusterNode>': 'node[]',
  TlsOptions: 'object',
  SentinelOptions: 'object',
}

function expected(name) {
  return Object.fromEntries(Object.entries(fields(name)).map(([k, t]) => [k, AS_JS[t] ?? `unmapped TS type ${t}`]))
}

const sorted = (o) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)))

test('LockClient options are the fields of LockClientOptions, with their types', () => {
  assert.deepEqual(sorted(CLIENT), sorted(expected('LockClientOptions')))
})

test('acquire options are the fields of AcquireOptions, plus the JS-only signal and onLost', () => {
  assert.deepEqual(sorted(ACQUIRE), sorted(expected('AcquireOptions')))
  const jsOnly = { signal: 'AbortSignal', onLost: 'function' }
  assert.deepEqual(sorted(ACQUIRE_JS), sorted({ ...expected('AcquireOptions'), ...jsOnly }))
})

test('a cluster member of nodes has the fields of ClusterNode', () => {
  assert.deepEqual(sorted(CLUSTER_NODE), sorted(expected('ClusterNode')))
})

test('tls fields are the fields of TlsOptions', () => {
  assert.deepEqual([...TLS_FIELDS].sort(), Object.keys(fields('TlsOptions')).sort())
})

test('sentinel fields are the fields of SentinelOptions, with their types', () => {
  assert.deepEqual(sorted(SENTINEL), sorted(expected('SentinelOptions')))
})

test('limits and defaults come from the addon, declared once in Rust', () => {
  assert.equal(binding.MAX_MS, 2 ** 31 - 1)
  assert.equal(binding.MAX_KEY_BYTES, 64 * 1024)
  assert.equal(binding.DEFAULT_URL, 'redis://127.0.0.1:6379')
  assert.equal(binding.URL_ENV, 'REDIS_URL')
  assert.equal(binding.DEFAULT_TTL_MS, 30000)
  for (const name of ['MAX_MS', 'MAX_KEY_BYTES', 'DEFAULT_URL', 'URL_ENV', 'DEFAULT_TTL_MS']) {
    assert.match(dts, new RegExp(`^export declare const ${name}: (number|string)$`, 'm'), `${name} is typed in binding.d.ts`)
  }
})

test('every acquire option reaches the native layer: the packed order names exactly the options lib/ accepts', () => {
  const { packedAcquireOptions } = require('../binding.js')
  const { ACQUIRE } = require('../lib/validate')
  assert.deepEqual([...packedAcquireOptions()].sort(), Object.keys(ACQUIRE).sort())
})
