'use strict'

// The native addon built beside the sources (lockdog.<platform>.node): whether a
// Rust source changed after it was built, and which cargo profile built it.
// `prepare` (npm install) uses it to skip a build that is already up to date;
// `npm test` uses it to rebuild a stale addon before testing it.

const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('./platform')

/** What a build reads: a change to any of these makes the built addon stale. */
const SOURCES = ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs', path.join('.cargo', 'config.toml')]

/** The most recently modified source file: { file (relative to root), mtimeMs }, or null. */
function newestSource(root) {
  let newest = null
  const visit = (p) => {
    const st = fs.statSync(p)
    if (st.isDirectory()) {
      for (const e of fs.readdirSync(p)) visit(path.join(p, e))
    } else if (!newest || st.mtimeMs > newest.mtimeMs) {
      newest = { file: path.relative(root, p), mtimeMs: st.mtimeMs }
    }
  }
  for (const p of SOURCES) {
    if (fs.existsSync(path.join(root, p))) visit(path.join(root, p))
  }
  return newest
}

/** Which cargo profile produced these bytes ('release' or 'debug'), when cargo's output is still around. */
function profileOf(root, bytes) {
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

/**
 * The addon beside the sources in `root`:
 * { name, file, exists, builtMs, newest, stale, profile }. `stale` is true when it
 * is missing or a source file is newer; `newest` names that file.
 */
function addonState(root) {
  const name = `lockdog.${hostPlatform()}.node`
  const file = path.join(root, name)
  const newest = newestSource(root)
  let st = null
  try {
    st = fs.statSync(file)
  } catch {}
  if (!st) return { name, file, exists: false, builtMs: null, newest, stale: true, profile: null }
  const stale = newest !== null && newest.mtimeMs > st.mtimeMs
  return { name, file, exists: true, builtMs: st.mtimeMs, newest, stale, profile: profileOf(root, fs.readFileSync(file)) }
}

/** A local time of day for messages: 09:14:02. */
function clock(ms) {
  return new Date(ms).toTimeString().slice(0, 8)
}

module.exports = { SOURCES, newestSource, profileOf, addonState, clock }
