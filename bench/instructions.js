'use strict'

// Instructions a sequential acquire+release pair costs the JS thread inside
// the addon (its Rust code and its allocator), counted by valgrind's
// callgrind: a count that does not depend on how loaded the machine is, so
// two builds compare on a noisy machine where their timings do not. Two runs
// of the same loop (a warm client, one node, a throwaway redis-server), of N
// and 6N pairs, are subtracted: what is left is 5N pairs' worth, start-up and
// warm-up gone. The whole JS thread's count is printed too; it moves with
// V8's compiler and collector, and is not comparable between runs.
//
//   node bench/instructions.js [--pairs N] [--addon FILE.node ...]
//
// Without --addon it builds the release addon (`cargo build --release
// --features mimalloc`, symbols kept) into $TMPDIR/lockdog-instructions-target.
// Several --addon files are measured one after the other. Needs valgrind.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { cargoBuild, ROOT } = require('./lib/addon')

/** The measured loop, in a process of its own under callgrind. */
async function child(pairs) {
  const { startRedis } = require('../scripts/local-redis')
  const { LockClient } = require(ROOT)
  const server = await startRedis()
  const locks = new LockClient({ url: server.url })
  try {
    for (let i = 0; i < 50; i++) await (await locks.acquire(`instructions:warm:${i}`)).release()
    for (let i = 0; i < pairs; i++) await (await locks.acquire(`instructions:${i % 64}`)).release()
  } finally {
    await locks.close()
    await server.stop()
  }
}

function buildRelease() {
  const targetDir = path.join(os.tmpdir(), 'lockdog-instructions-target')
  console.log(`building the release addon (symbols kept) into ${targetDir} ...`)
  process.env.CARGO_PROFILE_RELEASE_STRIP = 'none'
  const file = path.join(targetDir, 'lockdog.instructions.node')
  fs.copyFileSync(cargoBuild({ targetDir, features: ['mimalloc'] }), file)
  return file
}

/** Instructions on the JS thread (callgrind's thread 1): all, and in `addon`'s object. */
function counted(addon, pairs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-instructions-'))
  try {
    const out = path.join(dir, 'callgrind.out')
    const r = spawnSync('valgrind', ['--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${out}`,
      process.execPath, __filename, '--child', String(pairs)], {
      env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: path.resolve(addon) },
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
    })
    if (r.status !== 0) throw new Error(`the measured process failed:\n${r.stderr.slice(-3000)}`)
    const a = spawnSync('callgrind_annotate', ['--threshold=100', '--auto=no', `${out}-01`], { encoding: 'utf8', maxBuffer: 1 << 28 })
    if (a.status !== 0) throw new Error(`callgrind_annotate failed: ${a.stderr}`)
    let all = 0
    let own = 0
    for (const line of a.stdout.split('\n')) {
      const m = /^\s*([\d,]+) /.exec(line)
      if (!m) continue
      const n = Number(m[1].replaceAll(',', ''))
      all += n
      if (line.includes(`[${path.resolve(addon)}]`)) own += n
    }
    return { all, own }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function main() {
  if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is needed (apt-get install valgrind)')
  const args = process.argv.slice(2)
  const i = args.indexOf('--pairs')
  const pairs = i >= 0 ? Number(args[i + 1]) : 400
  const addons = args.flatMap((a, j) => (args[j - 1] === '--addon' ? [a] : []))
  if (!addons.length) addons.push(buildRelease())
  console.log(`| addon | instructions a pair in the addon | on the whole JS thread |`)
  console.log('|:--|--:|--:|')
  for (const addon of addons) {
    const few = counted(addon, pairs)
    const many = counted(addon, 6 * pairs)
    const per = (k) => Math.round((many[k] - few[k]) / (5 * pairs))
    console.log(`| ${path.basename(addon)} | ${per('own')} | ${per('all')} |`)
  }
}

if (process.argv.includes('--child')) {
  child(Number(process.argv[process.argv.indexOf('--child') + 1])).catch((e) => {
    console.error(e)
    process.exit(1)
  })
} else {
  main()
}
