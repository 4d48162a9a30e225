'use strict'

// `prepare`: runs on `npm install` in a clone, on `npm install` from git and on
// `npm pack`. Builds the native addon (release) unless an up-to-date release
// build is already in place, so packing a built tree does not compile again.
// `npm publish` never builds: the binaries ship in the per-platform packages.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('./platform')

const root = path.join(__dirname, '..')
const addon = `lockdog.${hostPlatform()}.node`
const log = (msg) => console.error(`lockdog prepare: ${msg}`)

function newestSource() {
  let newest = 0
  const visit = (p) => {
    const st = fs.statSync(p)
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) visit(path.join(p, e))
    else newest = Math.max(newest, st.mtimeMs)
  }
  for (const p of ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs']) {
    if (fs.existsSync(path.join(root, p))) visit(path.join(root, p))
  }
  return newest
}

// Which cargo profile produced the addon, when cargo's output is still around.
function profileOf(bytes) {
  const target = path.join(root, 'target')
  if (!fs.existsSync(target)) return null
  const dirs = [target, ...fs.readdirSync(target).map((d) => path.join(target, d))]
  for (const profile of ['release', 'debug']) {
    for (const dir of dirs) {
      for (const lib of ['liblockdog.so', 'liblockdog.dylib', 'lockdog.dll']) {
        const p = path.join(dir, profile, lib)
        try {
          if (fs.statSync(p).size === bytes.length && fs.readFileSync(p).equals(bytes)) return profile
        } catch {}
      }
    }
  }
  return null
}

function upToDate() {
  const file = path.join(root, addon)
  if (!fs.existsSync(file)) return false
  if (fs.statSync(file).mtimeMs < newestSource()) return false
  return profileOf(fs.readFileSync(file)) !== 'debug'
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
