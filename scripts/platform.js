'use strict'

// The names napi-rs gives a native binary: `<platform>-<arch>[-<abi>]`, as in
// lockdog.linux-x64-gnu.node and the package lockdog-linux-x64-gnu. Used by the
// load error (binding.js), `prepare` and `npm run build-from-source`.

const fs = require('node:fs')

function isMusl() {
  if (process.platform !== 'linux') return false
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    const report = process.report?.getReport?.()
    if (report?.header?.glibcVersionRuntime) return false
    return (report?.sharedObjects ?? []).some((f) => /libc\.musl-|ld-musl-/.test(f))
  }
}

/** This machine's name, e.g. `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const libc = isMusl() ? 'musl' : 'gnu'
    return `linux-${arch}-${arch === 'arm' ? `${libc}eabihf` : libc}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

const ARCH = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm', riscv64gc: 'riscv64' }
const OS = { darwin: 'darwin', windows: 'win32', linux: 'linux', freebsd: 'freebsd' }

/** `x86_64-unknown-linux-gnu` -> `linux-x64-gnu`. */
function platformOfTarget(triple) {
  const [cpu, , system, abi] = triple.split('-')
  const platform = OS[system] ?? system
  const withAbi = abi && platform !== 'darwin' && platform !== 'freebsd'
  return [platform, ARCH[cpu] ?? cpu, withAbi ? abi : null].filter(Boolean).join('-')
}

/** The platforms this package publishes binaries for (package.json napi.targets). */
function publishedPlatforms() {
  const pkg = require('../package.json')
  return (pkg.napi?.targets ?? []).map(platformOfTarget)
}

module.exports = { hostPlatform, platformOfTarget, publishedPlatforms }
