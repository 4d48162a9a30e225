'use strict'

// The typings in every module form a user writes, each a small project under
// __test__/types/forms/ type-checked by the installed TypeScript (tsc -p):
//   cjs-ts-check  require() of lockdog and lockdog/redlock in a // @ts-check JS file
//   cts           import x = require() (and named imports) in a .cts file
//   mts           default and named imports in a .mts file (NodeNext)
//   bundler       default and named imports with moduleResolution bundler
// Each fixture also holds @ts-expect-error lines, so typings that resolved to `any`
// fail the check as surely as wrong ones.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { ROOT } = require('./helpers')

const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

const FORMS = {
  'cjs-ts-check': "const Redlock = require('lockdog/redlock'); new Redlock(...) in a // @ts-check JS file",
  cts: "import Redlock = require('lockdog/redlock') in a .cts file",
  mts: "import Redlock, { Lock } from 'lockdog/redlock' in a .mts file",
  bundler: 'default and named imports with moduleResolution bundler',
}

for (const [dir, what] of Object.entries(FORMS)) {
  test(`typings: ${what}`, () => {
    const r = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'forms', dir)], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120000,
    })
    assert.equal(r.status, 0, `tsc -p __test__/types/forms/${dir} exited ${r.status}:\n${r.stdout}${r.stderr}`)
  })
}
