'use strict'

// The Node.js versions lockdog is tested on, and where their binaries live.
// `npm run test:matrix` runs the suite once per version; `npm test` on one of them. They install with
// `node scripts/node-versions.js install` (the npm packages node-<os>-<arch>@<major>,
// unpacked under .cache/node-<major>/, which `npm ci` leaves alone).
// `node scripts/node-versions.js bin 24` prints the folder holding that Node binary.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
// package.json engines is ">= 22": the oldest of these. LOCKDOG_TEST_NODES=24 (a
// comma list) narrows a run, e.g. in a CI matrix that already picks one version.
const TESTED = process.env.LOCKDOG_TEST_NODES
  ? process.env.LOCKDOG_TEST_NODES.split(',').map(Number).filter(Boolean)
  : [22, 24, 26]
const pkgName = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`

function cached(major) {
  const dir = path.join(root, '.cache', `node-${major}`)
  const bin = process.platform === 'win32' ? 'node.exe' : path.join('bin', 'node')
  return { dir, bin: path.join(dir, 'node_modules', pkgName, bin) }
}

function versionOf(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

/** [{ major, bin, version }] for each tested major found; [{ major, why }] for the rest. */
function find() {
  const found = []
  const missing = []
  const current = Number(process.versions.node.split('.')[0])
  for (const major of TESTED) {
    const bin = current === major ? process.execPath : cached(major).bin
    const version = fs.existsSync(bin) ? versionOf(bin) : null
    if (version) found.push({ major, bin, version })
    else missing.push({ major, why: `not installed (node scripts/node-versions.js install fetches ${pkgName}@${major})` })
  }
  return { found, missing, current }
}

/**
 * Fetches the majors of `majors` (the tested ones by default; any other, such as an
 * unsupported 20 for the packaging test's error check) that are neither this shell's
 * node nor in .cache/; returns how many failed.
 */
function install(majors = TESTED) {
  const current = Number(process.versions.node.split('.')[0])
  let failed = 0
  for (const major of majors.filter((m) => m !== current && !binOf(m))) {
    const { dir, bin } = cached(major)
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n')
    console.log(`installing ${pkgName}@${major} into ${path.relative(root, dir)}`)
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--loglevel=error', `${pkgName}@${major}`],
      { cwd: dir, stdio: 'inherit', shell: process.platform === 'win32' })
    const version = r.status === 0 && fs.existsSync(bin) ? versionOf(bin) : null
    if (version) {
      console.log(`Node ${version}: ${bin}`)
    } else {
      failed++
      console.log(`Node ${major}: ${pkgName}@${major} did not install`)
    }
  }
  return failed
}

/** The cached binary of a Node major, or null. */
function binOf(major) {
  const { bin } = cached(major)
  return fs.existsSync(bin) ? bin : null
}

const current = Number(process.versions.node.split('.')[0])

module.exports = { TESTED, current, pkgName, find, install, binOf }

if (require.main === module) {
  const [command, major] = process.argv.slice(2)
  if (command === 'install') {
    install()
  } else if (command === 'bin' && fs.existsSync(cached(Number(major)).bin)) {
    console.log(path.dirname(cached(Number(major)).bin))
  } else if (command === 'bin' && Number(major) === Number(process.versions.node.split('.')[0])) {
    // This shell's own node is that version (install leaves it out of .cache/).
    console.log(path.dirname(process.execPath))
  } else {
    console.error('usage: node scripts/node-versions.js install | bin <major> (after install)')
    process.exit(2)
  }
}
