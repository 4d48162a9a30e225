'use strict'

// The shape of the JavaScript layer: no require cycle among the modules the
// entry points reach (a lazy require() inside a function counts too), every
// file of lib/ reached from an entry point, and no file of lib/ over 400 lines.
// Read from the sources, nothing is loaded.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'lib')
const ENTRIES = ['index.js', 'redlock.js', 'bin/lockdog.js']
const MAX_LINES = 400

const rel = (file) => path.relative(ROOT, file)

/** Every .js file under `dir`. */
function jsFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) return jsFiles(p)
    return e.name.endsWith('.js') ? [p] : []
  })
}

/** The files `file` requires by a relative path (node: and package requires left out). */
function requires(file) {
  const src = fs.readFileSync(file, 'utf8')
  const out = []
  for (const m of src.matchAll(/require\(\s*(['"])(\.{1,2}\/[^'"]+)\1\s*\)/g)) {
    out.push(require.resolve(path.resolve(path.dirname(file), m[2])))
  }
  return out
}

/**
 * The require graph reached from the entry points: file → files it requires.
 * The entries and lib/ are followed; what they require elsewhere (binding.js,
 * which loads the addon, and package.json) is a leaf.
 */
function graph() {
  const entries = ENTRIES.map((e) => path.join(ROOT, e))
  const followed = (file) => entries.includes(file) || file.startsWith(LIB + path.sep)
  const edges = new Map()
  const pending = [...entries]
  while (pending.length > 0) {
    const file = pending.pop()
    if (edges.has(file)) continue
    const next = followed(file) ? requires(file) : []
    edges.set(file, next)
    pending.push(...next)
  }
  return edges
}

/** The first cycle found, as the list of files around it, or null. */
function findCycle(edges) {
  const state = new Map() // file → 'open' while on the DFS path, 'done' after
  const pathNow = []
  const visit = (file) => {
    state.set(file, 'open')
    pathNow.push(file)
    for (const next of edges.get(file) || []) {
      if (state.get(next) === 'open') return [...pathNow.slice(pathNow.indexOf(next)), next]
      if (!state.has(next)) {
        const found = visit(next)
        if (found) return found
      }
    }
    pathNow.pop()
    state.set(file, 'done')
    return null
  }
  for (const file of edges.keys()) {
    if (!state.has(file)) {
      const found = visit(file)
      if (found) return found
    }
  }
  return null
}

test('no require cycle among the modules reached from index.js, redlock.js and bin/lockdog.js', () => {
  const cycle = findCycle(graph())
  assert.equal(cycle, null, cycle && `require cycle: ${cycle.map(rel).join(' -> ')}`)
})

test('the cycle check finds a cycle where there is one', () => {
  const edges = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]])
  assert.deepEqual(findCycle(edges), ['a', 'b', 'c', 'a'])
  assert.equal(findCycle(new Map([['a', ['b', 'c']], ['b', ['c']], ['c', []]])), null)
})

test('every file of lib/ is reached from an entry point', () => {
  const reached = new Set(graph().keys())
  const unreached = jsFiles(LIB).filter((f) => !reached.has(f)).map(rel)
  assert.deepEqual(unreached, [])
})

test(`no file of lib/ is over ${MAX_LINES} lines`, () => {
  const long = jsFiles(LIB)
    .map((f) => ({ file: rel(f), lines: fs.readFileSync(f, 'utf8').split('\n').length - 1 }))
    .filter((f) => f.lines > MAX_LINES)
  assert.deepEqual(long, [])
})
