'use strict'

// `npm test` never tests a stale addon: in a scratch copy of the runner, a Rust
// source touched after the addon was built makes the next run rebuild it (here
// through the copy's own `npm run build`) before any test file runs, or, without
// cargo, stop at once naming the file and the command; an up-to-date addon is
// left alone. Every run says which addon the tests load.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { addonState } = require('../scripts/addon')

const ROOT = path.join(__dirname, '..')
const built = addonState(ROOT)

/** A scratch copy of what `node scripts/test.js FILE` needs, with the real addon and a probe test file. */
function scratchCopy(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-stale-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.cpSync(path.join(ROOT, 'scripts'), path.join(dir, 'scripts'), { recursive: true })
  for (const f of ['binding.js', 'loader.js', 'Cargo.toml', 'build.rs']) fs.copyFileSync(path.join(ROOT, f), path.join(dir, f))
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  fs.mkdirSync(path.join(dir, 'src', 'core', 'engine'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'src', 'lib.rs'), 'mod core;\n')
  fs.writeFileSync(path.join(dir, 'src', 'core', 'engine', 'renew.rs'), '// the loss message\n')
  // The copy's build stands in for napi's: it records that it ran and rewrites the addon.
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const rebuild = (name) => `node -e "const fs=require('fs');fs.appendFileSync('build.log','${name}\\n');fs.copyFileSync('${built.name}','${built.name}.tmp');fs.renameSync('${built.name}.tmp','${built.name}')"`
  pkg.scripts = { build: rebuild('build'), 'build:debug': rebuild('build:debug') }
  delete pkg.scripts.prepare
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2))
  fs.mkdirSync(path.join(dir, '__test__'))
  fs.writeFileSync(path.join(dir, '__test__', 'probe.test.js'), `
const { test } = require('node:test')
const fs = require('node:fs')
const path = require('node:path')
test('probe', () => {
  const { NativeClient } = require('../binding')
  if (typeof NativeClient !== 'function') throw new Error('the addon did not load')
  fs.appendFileSync(path.join(__dirname, '..', 'probe.log'), 'ran\\n')
})
`)
  const addon = path.join(dir, built.name)
  fs.copyFileSync(built.file, addon)
  // The addon was built a minute ago; renew.rs is edited now.
  const past = new Date(Date.now() - 60_000)
  for (const f of ['Cargo.toml', 'build.rs', 'src/lib.rs', 'src/core/engine/renew.rs', built.name]) fs.utimesSync(path.join(dir, f), past, past)
  return { dir, addon, touch: () => fs.utimesSync(path.join(dir, 'src/core/engine/renew.rs'), new Date(), new Date()) }
}

function runTests(dir, env = {}) {
  const major = process.versions.node.split('.')[0]
  // NODE_TEST_CONTEXT would make the copy's `node --test` report to this runner instead of running its file.
  const { NODE_TEST_CONTEXT, ...outer } = process.env
  const r = spawnSync(process.execPath, ['scripts/test.js', '__test__/probe.test.js'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...outer, LOCKDOG_TEST_NODES: major, NAPI_RS_NATIVE_LIBRARY_PATH: '', ...env },
  })
  const read = (f) => (fs.existsSync(path.join(dir, f)) ? fs.readFileSync(path.join(dir, f), 'utf8') : '')
  return { status: r.status, out: `${r.stdout}\n${r.stderr}`, built: read('build.log'), probed: read('probe.log') }
}

test('npm test: a Rust source edited after the build makes it rebuild the addon before any test runs', { skip: !built.exists && 'no addon built' }, (t) => {
  const { dir, addon, touch } = scratchCopy(t)
  touch()
  const before = fs.statSync(addon).mtimeMs
  const r = runTests(dir)
  assert.equal(r.status, 0, r.out)
  assert.match(r.out, /is older than src\/core\/engine\/renew\.rs .*rebuilding it first \(npm run build(:debug)?\)/, r.out)
  assert.equal(r.built.trim().split('\n').length, 1, `one build: ${r.built}`)
  assert.equal(r.probed, 'ran\n', 'the test file ran after the build')
  assert.ok(r.out.indexOf('rebuilt') < r.out.indexOf('1 test file(s)'), r.out)
  assert.ok(fs.statSync(addon).mtimeMs > before)
  assert.match(r.out, new RegExp(`addon: ${built.name.replace(/\./g, '\\.')} \\(.*newer than every Rust source\\)`), r.out)
})

test('npm test: a stale addon with no cargo to rebuild it stops at once, naming the file and the command', { skip: !built.exists && 'no addon built' }, (t) => {
  const { dir, touch } = scratchCopy(t)
  touch()
  const r = runTests(dir, { CARGO: path.join(dir, 'no-such-cargo') })
  assert.equal(r.status, 1, r.out)
  assert.match(r.out, /older than src\/core\/engine\/renew\.rs/)
  assert.match(r.out, /run `npm run build(:debug)?`, then npm test again/)
  assert.equal(r.built, '', 'nothing was built')
  assert.equal(r.probed, '', 'no test file ran')
})

test('npm test: an addon newer than every Rust source is tested as it is, and named', { skip: !built.exists && 'no addon built' }, (t) => {
  const { dir } = scratchCopy(t)
  const r = runTests(dir, { CARGO: path.join(dir, 'no-such-cargo') })
  assert.equal(r.status, 0, r.out)
  assert.equal(r.built, '', 'nothing was built')
  assert.equal(r.probed, 'ran\n')
  assert.match(r.out, new RegExp(`addon: ${built.name.replace(/\./g, '\\.')} \\(`), r.out)
  assert.doesNotMatch(r.out, /rebuilding/)
})
