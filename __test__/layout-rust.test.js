'use strict'

// The shape of src/core: its modules (each file or folder directly under
// src/core) import one another without a cycle, and each layer builds only
// on the layers below it: the data (model), the pure verdicts (quorum) and
// options (config), the sans-I/O operations (ops), the bytes (transport),
// what a client keeps (engine), what runs an acquisition (drivers), and the
// entry point (client). Test modules are left out: a test may use whatever
// it checks.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const core = path.join(__dirname, '..', 'src', 'core')

/** Every .rs file under `dir`, as paths relative to src/core. */
function sources(dir = core) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name)
    if (e.isDirectory()) return sources(full)
    return e.name.endsWith('.rs') ? [path.relative(core, full)] : []
  })
}

/** The module of src/core a file belongs to (`engine` for engine/lock.rs), or null for mod.rs. */
function moduleOf(file) {
  const [first] = file.split(path.sep)
  if (first === 'mod.rs') return null
  return first.replace(/\.rs$/, '')
}

/** The source without comments, string literals and its inline `#[cfg(test)]` module. */
function code(text) {
  const stripped = text
    .replace(/\/\/[^\n]*/g, '')
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
  const cut = stripped.search(/^#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod \w+ \{/m)
  return cut === -1 ? stripped : stripped.slice(0, cut)
}

/** The names following `at` in a path: `x` for `x::…`, each top-level name of `{a, b::c}`. */
function namesAfter(src, at) {
  if (src[at] !== '{') {
    const m = /^[a-z_][a-z0-9_]*/.exec(src.slice(at))
    return m ? [m[0]] : []
  }
  let depth = 0
  let start = at + 1
  const names = []
  for (let i = at; i < src.length; i++) {
    const c = src[i]
    if (c === '{') depth++
    else if (c === '}') depth--
    if ((c === ',' && depth === 1) || depth === 0) {
      const m = /^\s*([a-z_][a-z0-9_]*)/.exec(src.slice(start, i))
      if (m && m[1] !== 'self') names.push(m[1])
      start = i + 1
    }
    if (depth === 0) break
  }
  return names
}

/** Module → the other modules of src/core it names. */
function imports() {
  const graph = new Map()
  for (const file of sources()) {
    const from = moduleOf(file)
    if (!from || path.basename(file) === 'tests.rs') continue
    const src = code(fs.readFileSync(path.join(core, file), 'utf8'))
    const to = graph.get(from) ?? new Set()
    graph.set(from, to)
    // `super::` names a module of src/core from src/core/x.rs and src/core/x/mod.rs.
    const parts = file.split(path.sep)
    const topLevel = parts.length === 1 || (parts.length === 2 && parts[1] === 'mod.rs')
    const re = topLevel ? /\b(?:crate::core|super)::/g : /\bcrate::core::/g
    for (let m = re.exec(src); m; m = re.exec(src)) {
      for (const name of namesAfter(src, m.index + m[0].length)) {
        if (name !== from) to.add(name)
      }
    }
  }
  return graph
}

/** One cycle in `graph`, as a list of modules, or null. */
function findCycle(graph) {
  const state = new Map()
  const stack = []
  function visit(n) {
    state.set(n, 'open')
    stack.push(n)
    for (const m of graph.get(n) ?? []) {
      if (!graph.has(m)) continue
      if (state.get(m) === 'open') return [...stack.slice(stack.indexOf(m)), m]
      if (!state.has(m)) {
        const found = visit(m)
        if (found) return found
      }
    }
    stack.pop()
    state.set(n, 'done')
    return null
  }
  for (const n of [...graph.keys()].sort()) {
    if (!state.has(n)) {
      const found = visit(n)
      if (found) return found
    }
  }
  return null
}

/**
 * The layers of src/core, lowest first; a module may import its own layer's
 * and lower layers' modules only. The basics every layer uses come first.
 */
const LAYERS = [
  ['error', 'base', 'broken', 'tls'],
  ['model'],
  ['quorum'],
  ['config'],
  ['ops'],
  ['transport'],
  ['engine'],
  ['drivers'],
  ['client'],
]
const layerOf = (m) => LAYERS.findIndex((l) => l.includes(m))

test('the modules of src/core import one another without a cycle', () => {
  const graph = imports()
  assert.ok(graph.has('engine') && graph.has('quorum') && graph.has('transport'), 'src/core is read')
  const cycle = findCycle(graph)
  assert.equal(cycle, null, `import cycle: ${cycle?.join(' → ')}`)
})

test('every module of src/core has its layer, and builds on no layer above it', () => {
  const graph = imports()
  const upward = []
  for (const [from, tos] of graph) {
    assert.notEqual(layerOf(from), -1, `src/core/${from} is in no layer of this test`)
    for (const to of tos) {
      if (layerOf(to) > layerOf(from)) upward.push(`${from} → ${to}`)
    }
  }
  assert.deepEqual(upward, [])
})

test('the model, quorum and ops hold no runtime: no tokio, no await, no clock read', () => {
  const found = []
  for (const file of sources()) {
    if (!/^(model|quorum|ops)\//.test(file) || /(^|\/)tests?(_\w+)?\.rs$/.test(file)) continue
    const src = code(fs.readFileSync(path.join(core, file), 'utf8'))
    for (const [what, re] of [['tokio', /\btokio::/], ['.await', /\.await\b/], ['Instant::now()', /Instant::now\(\)/]]) {
      if (re.test(src)) found.push(`${file}: ${what}`)
    }
  }
  assert.deepEqual(found, [])
})

/** Every .rs file of src/ apart from test modules, each with its text before an inline `#[cfg(test)] mod`. */
function nonTestSources() {
  const src = path.join(__dirname, '..', 'src')
  const walk = (dir) =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const full = path.join(dir, e.name)
      if (e.isDirectory()) return walk(full)
      return e.name.endsWith('.rs') && !/^(\w+_)?tests?(_\w+)?\.rs$/.test(e.name) ? [full] : []
    })
  return walk(src).map((full) => {
    const text = fs.readFileSync(full, 'utf8')
    // Only an inline test module ends the code: after `mod tests;` more may follow.
    const cut = text.search(/^#\[cfg\((?:all\()?test\b[^\n]*\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod \w+ \{/m)
    return { file: path.relative(path.join(src, '..'), full), text: cut === -1 ? text : text.slice(0, cut) }
  })
}

/** A file of src/ reads in one sitting: its unit tests apart, about 400 lines at most. */
const MAX_RUST_LINES = 410

test(`no file of src/ is over ${MAX_RUST_LINES} lines, its unit tests apart`, () => {
  const files = nonTestSources()
  assert.ok(files.length > 50, 'src/ is read')
  const long = files
    .map(({ file, text }) => ({ file, lines: text.split('\n').length - 1 }))
    .filter((f) => f.lines > MAX_RUST_LINES)
  assert.deepEqual(long, [])
})

test("no type's impl blocks are spread over more than two files", () => {
  const files = new Map()
  for (const { file, text } of nonTestSources()) {
    for (const m of code(text).matchAll(/^impl(?:<[^>{]*>)?\s+(?:[^{]+?\s+for\s+)?([A-Za-z_][\w:]*)/gm)) {
      const type = m[1].split('::').pop()
      if (!files.has(type)) files.set(type, new Set())
      files.get(type).add(file)
    }
  }
  assert.ok(files.has('Wire') && files.has('Client'), 'impl blocks are found')
  const spread = [...files].filter(([, f]) => f.size > 2).map(([type, f]) => `${type}: ${[...f].sort().join(', ')}`)
  assert.deepEqual(spread, [])
})

test('the cycle check finds a cycle when there is one', () => {
  const graph = new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a'])]])
  assert.deepEqual(findCycle(graph), ['a', 'b', 'c', 'a'])
  assert.equal(findCycle(new Map([['a', new Set(['b'])], ['b', new Set()]])), null)
  assert.deepEqual(namesAfter('{a::X, b::{c, d}, self}', 0), ['a', 'b'])
})
