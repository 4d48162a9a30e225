'use strict'

// `npm run build-from-source`: builds the native addon for this machine from the
// Rust sources shipped in the package, for a platform with no prebuilt binary.
// Needs Rust (https://rustup.rs); nothing else. Run it in the installed package:
//   cd node_modules/lockdog && npm run build-from-source

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('./platform')

const root = path.join(__dirname, '..')
const addon = path.join(root, `lockdog.${hostPlatform()}.node`)
const cargo = process.env.CARGO || 'cargo'

const version = spawnSync(cargo, ['--version'], { encoding: 'utf8' })
if (version.status !== 0) {
  console.error('build-from-source needs Rust (cargo) on PATH: install it from https://rustup.rs')
  process.exit(1)
}
console.error(`Building ${path.basename(addon)} with ${version.stdout.trim()} (release; takes a few minutes)`)

// cargo prints its progress on stderr; stdout carries the JSON that names the library it wrote.
const build = spawnSync(cargo, ['build', '--release', '--lib', '--locked', '--features', 'mimalloc', '--message-format=json-render-diagnostics'], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
  maxBuffer: 256 * 1024 * 1024,
})
if (build.status !== 0) {
  console.error('cargo build failed; the compiler error is above.')
  process.exit(build.status ?? 1)
}
let library = null
for (const line of build.stdout.split('\n')) {
  if (!line.startsWith('{')) continue
  const msg = JSON.parse(line)
  if (msg.reason === 'compiler-artifact' && msg.target?.name === 'lockdog' && msg.target.kind.includes('cdylib')) {
    library = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) ?? library
  }
}
if (!library) {
  console.error('cargo build succeeded but named no cdylib for lockdog')
  process.exit(1)
}
fs.copyFileSync(library, addon)

const check = spawnSync(process.execPath, ['-e', 'require(process.argv[1])', path.join(root, 'index.js')], {
  encoding: 'utf8',
})
if (check.status !== 0) {
  console.error(`Built ${addon}, but it does not load:\n${check.error?.message ?? check.stderr}`)
  process.exit(1)
}
console.error(`Built ${addon}; lockdog loads it. cargo's build directory ${path.join(root, 'target')} can be deleted.`)
