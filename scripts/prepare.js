'use strict'

// `prepare`: runs on `npm install` in a clone, on `npm install` from git and on
// `npm pack`. Builds the native addon (release) unless an up-to-date release
// build is already in place, so packing a built tree does not compile again.
// `npm publish` never builds: the binaries ship in the per-platform packages.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('./platform')
const { addonState } = require('./addon')

const root = path.join(__dirname, '..')
const addon = `lockdog.${hostPlatform()}.node`
const log = (msg) => console.error(`lockdog prepare: ${msg}`)

function upToDate() {
  const state = addonState(root)
  return !state.stale && state.profile !== 'debug'
}

if (process.env.npm_command === 'publish') {
  // `napi artifacts` leaves a copy of each binary in the root beside the one in
  // npm/<platform>/; those copies are dropped so the tarball carries none.
  const strays = []
  for (const f of fs.readdirSync(root).filter((f) => /^lockdog\..+\.node$/.test(f))) {
    const copy = path.join(root, 'npm', f.slice('lockdog.'.length, -'.node'.length), f)
    if (fs.existsSync(copy) && fs.readFileSync(copy).equals(fs.readFileSync(path.join(root, f)))) {
      fs.rmSync(path.join(root, f))
      log(`publishing: removed ${f}, a copy of ${path.relative(root, copy)}`)
    } else {
      strays.push(f)
    }
  }
  if (strays.length) {
    log(`${strays.join(', ')} in the package root would be published inside lockdog itself;`)
    log('binaries ship in the per-platform packages (npm/, filled by `npm run artifacts`). Delete it and publish again.')
    process.exit(1)
  }
  log('publishing: not building (binaries ship in the per-platform packages)')
  process.exit(0)
}

if (upToDate()) {
  log(`${addon} is a release build newer than the Rust sources: not rebuilding (npm run build forces one)`)
  process.exit(0)
}

const cargo = spawnSync(process.env.CARGO || 'cargo', ['--version'], { encoding: 'utf8' })
if (cargo.status !== 0) {
  log('building the native addon needs Rust (cargo), which is not on PATH.')
  log('Install Rust (https://rustup.rs) and run this again, or install the published')
  log('package, which ships prebuilt binaries: npm install lockdog')
  process.exit(1)
}

log(`building ${addon} with ${cargo.stdout.trim()} (release; a first build takes a few minutes)`)
const started = Date.now()
const npm = process.env.npm_execpath
const build = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: root, stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
if (build.status !== 0) {
  log('the build failed; the compiler error is above.')
  process.exit(build.status ?? 1)
}
log(`built ${addon} in ${((Date.now() - started) / 1000).toFixed(0)} s`)
