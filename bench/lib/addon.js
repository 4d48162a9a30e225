'use strict'

// A private, frozen copy of lockdog for the whole run: the JS facade plus a release
// build of the addon. The repository's own .node may be a debug build, or be rebuilt
// by someone else mid-run (debug and release write the same file), so the benchmark
// never loads it in place.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawnSync } = require('node:child_process')
const { addonState } = require('../../scripts/addon')

const ROOT = path.resolve(__dirname, '..', '..')
const TARGET = 'x86_64-unknown-linux-gnu'
const NODE_FILE = 'lockdog.linux-x64-gnu.node'

function isDebugBuild(file) {
  const r = spawnSync('file', [file], { encoding: 'utf8' })
  if (r.status === 0) return /with debug_info/.test(r.stdout)
  return fs.statSync(file).size > 10 * 1024 * 1024
}

/**
 * Builds the addon (cdylib) with cargo into `targetDir` (never touching the repo's .node):
 * `release` or debug, with `features`; returns the path of the built library.
 */
function cargoBuild({ targetDir, release = true, features = [] }) {
  const args = ['build', '--lib', '--target', TARGET, ...(release ? ['--release'] : [])]
  if (features.length) args.push('--features', features.join(','))
  const r = spawnSync('cargo', args, {
    cwd: ROOT,
    env: { ...process.env, CARGO_TARGET_DIR: targetDir },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  if (r.status !== 0) throw new Error(`cargo ${args.join(' ')} failed`)
  return path.join(targetDir, TARGET, release ? 'release' : 'debug', 'liblockdog.so')
}

/** Builds the cdylib in release mode into a private target dir (never touches the repo's .node). */
function buildRelease(log) {
  const targetDir = process.env.BENCH_TARGET_DIR || path.join(os.tmpdir(), 'lockdog-bench-target')
  log(`building lockdog (release) into ${targetDir} ...`)
  const t = Date.now()
  const built = cargoBuild({ targetDir, features: ['mimalloc'] })
  log(`built in ${((Date.now() - t) / 1000).toFixed(0)} s`)
  return built
}

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')
}

function git(args) {
  const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

/**
 * Returns { path, source, sha256, commit, dirty } where `path` can be require()d.
 * `mode`: 'auto' (repo .node if it is a release build newer than the sources, else build),
 * 'build' (always build), 'repo' (use the repo's .node as it is), or the path of a
 * `.node` file (e.g. another checkout's build, for an A/B run with this facade).
 */
function prepareAddon({ mode = 'auto', log = console.log } = {}) {
  const repoNode = path.join(ROOT, NODE_FILE)
  let nodeFile
  let source
  const repo = addonState(ROOT)
  const repoUsable = repo.exists && !repo.stale && !isDebugBuild(repoNode)
  if (mode.endsWith('.node')) {
    nodeFile = path.resolve(mode)
    if (!fs.existsSync(nodeFile)) throw new Error(`--addon ${mode}: no such file`)
    source = `${nodeFile}${isDebugBuild(nodeFile) ? ' (DEBUG build!)' : ''}`
  } else if (mode === 'repo' || (mode === 'auto' && repoUsable)) {
    nodeFile = repoNode
    source = isDebugBuild(repoNode) ? 'repository .node (DEBUG build!)' : 'repository .node (release)'
  } else {
    nodeFile = buildRelease(log)
    source = 'private cargo build --release'
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-bench-addon-'))
  fs.mkdirSync(path.join(dir, 'scripts'))
  for (const f of ['index.js', 'binding.js', 'loader.js', 'scripts/platform.js', 'package.json']) {
    fs.copyFileSync(path.join(ROOT, f), path.join(dir, f))
  }
  fs.cpSync(path.join(ROOT, 'lib'), path.join(dir, 'lib'), { recursive: true })
  fs.copyFileSync(nodeFile, path.join(dir, NODE_FILE))
  const dirty = git(['status', '--porcelain', '--', 'src', 'lib', 'index.js', 'Cargo.toml'])
  return {
    path: dir,
    source,
    sha256: sha256(path.join(dir, NODE_FILE)),
    bytes: fs.statSync(path.join(dir, NODE_FILE)).size,
    commit: git(['rev-parse', '--short', 'HEAD']),
    dirty: Boolean(dirty),
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}

module.exports = { prepareAddon, cargoBuild, ROOT }
