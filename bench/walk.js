'use strict'

// The walk of one acquire: every source file of lockdog that runs between the
// JS call and its settled promise, for an acquire that wins at once on the
// JS-loop driver (a warm client, one node), on the JS thread (what the
// runtime's thread does meanwhile, e.g. the watchdog taking the new lock in,
// is not the walk). Rust files from a debug build of the addon (no inlining:
// each function stays in its own file) run under valgrind's callgrind with
// collection on around the acquire only; JS files from V8's precise coverage
// over the same window.
//
//   node bench/walk.js [--addon FILE.node] [--keep DIR]
//
// Without --addon it builds the debug addon (`cargo build --lib`) into
// $TMPDIR/lockdog-walk-target. Needs valgrind (callgrind_control). Counts do
// not depend on how loaded the machine is. It also counts the lines of the
// Rust functions that ran, beside the lines of the files they are in.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync, execFileSync } = require('node:child_process')

const { cargoBuild, ROOT } = require('./lib/addon')

function option(name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback
}

/** The walked acquire, in a process of its own under callgrind. */
async function child() {
  const inspector = require('node:inspector')
  const { startRedis } = require('../scripts/local-redis')
  const { LockClient } = require(ROOT)
  const session = new inspector.Session()
  session.connect()
  const post = (method, params) => {
    let out
    session.post(method, params, (err, r) => {
      if (err) throw err
      out = r
    })
    return out
  }
  const collect = (on) => {
    execFileSync('callgrind_control', ['-i', on ? 'on' : 'off', String(process.pid)], { stdio: 'ignore' })
    // callgrind reads the request between basic blocks: keep running until it has.
    const until = Date.now() + 300
    while (Date.now() < until);
  }
  const server = await startRedis()
  const locks = new LockClient({ url: server.url })
  try {
    for (let i = 0; i < 5; i++) await (await locks.acquire(`walk:warm:${i}`, { ttl: 10000 })).release()
    post('Profiler.enable')
    post('Profiler.startPreciseCoverage', { callCount: true, detailed: false })
    post('Profiler.takePreciseCoverage')
    collect(true)
    const lock = await locks.acquire('walk:one', { ttl: 10000 })
    const { result } = post('Profiler.takePreciseCoverage')
    collect(false)
    const js = new Set()
    for (const script of result) {
      if (!script.url.startsWith('file://')) continue
      const file = path.relative(ROOT, new URL(script.url).pathname)
      if (file.startsWith('..') || file.startsWith('node_modules') || file.startsWith('bench')) continue
      if (script.functions.some((f) => f.ranges[0].count > 0 && f.functionName !== '')) js.add(file)
    }
    if (!lock.held || !locks.fastPath || locks.stats().onTokio !== 0) {
      throw new Error('the acquire did not run on the JS-loop driver')
    }
    fs.writeFileSync(process.env.WALK_JS_OUT, JSON.stringify([...js].sort()))
    await lock.release()
  } finally {
    await locks.close()
    await server.stop()
  }
}

function buildDebug() {
  const targetDir = path.join(os.tmpdir(), 'lockdog-walk-target')
  console.log(`building the debug addon into ${targetDir} ...`)
  const file = path.join(targetDir, 'lockdog.walk.node')
  fs.copyFileSync(cargoBuild({ targetDir, release: false }), file)
  return file
}

/** The files of src/ whose functions ran, from callgrind's output. */
function rustFiles(out) {
  const r = spawnSync('callgrind_annotate', ['--threshold=100', '--auto=no', out], { encoding: 'utf8', maxBuffer: 1 << 28 })
  if (r.status !== 0) throw new Error(`callgrind_annotate failed: ${r.stderr}`)
  const files = new Set()
  for (const line of r.stdout.split('\n')) {
    // Its file as the debug info names it: relative to the crate, or whole.
    const m = /(?:^|[\s/])(src\/[\w/]+\.rs):/.exec(line)
    // lib.rs holds only napi-rs's generated registration.
    if (m && m[1] !== 'src/lib.rs' && line.includes('lockdog::') && fs.existsSync(path.join(ROOT, m[1]))) files.add(m[1])
  }
  return [...files].sort()
}

/** A line of Rust with its string and char literals emptied and its comment cut: its braces are the code's. */
const bare = (line) => line.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/'(?:[^'\\]|\\.)'/g, "''").replace(/\/\/.*$/, '')

/**
 * How much of those files one acquire runs: the lines of every Rust function
 * with a line that ran (its docs and attributes included), from callgrind's
 * per-line counts, beside the files' lines before their unit tests.
 */
function rustLines(out, files) {
  const r = spawnSync('callgrind_annotate', ['--auto=yes', '--threshold=100', `--include=${ROOT}`, out], { encoding: 'utf8', maxBuffer: 1 << 28 })
  if (r.status !== 0) throw new Error(`callgrind_annotate failed: ${r.stderr}`)
  const ran = new Map()
  let file = null
  let line = null
  for (const l of r.stdout.split('\n')) {
    const head = /^-- Auto-annotated source: (\S+)/.exec(l)
    if (head) {
      file = files.includes(head[1]) ? head[1] : null
      if (file && !ran.has(file)) ran.set(file, new Set())
      line = null
      continue
    }
    if (!file) continue
    const at = /^-- line (\d+) -/.exec(l)
    if (at) {
      line = Number(at[1])
      continue
    }
    // A source line: its count (or "."), then the text; "=>" lines are calls out of it.
    if (line === null || /^\s*[\d,]+ \([^)]*\)\s+=>/.test(l) || l.startsWith('--')) continue
    const m = /^\s*(\.|[\d,]+ \([^)]*\))\s/.exec(l) ?? (l.trim() === '.' ? ['.', '.'] : null)
    if (!m) continue
    if (m[1] !== '.') ran.get(file).add(line)
    line++
  }
  let run = 0
  let whole = 0
  for (const [f, lines] of ran) {
    const src = fs.readFileSync(path.join(ROOT, f), 'utf8').split('\n')
    const tests = src.findIndex((l, i) => /^#\[cfg\((all\()?test\b/.test(l) && /^(pub(\([\w:]+\))?\s+)?mod \w+ \{/.test(src[i + 1] ?? ''))
    whole += tests === -1 ? src.length : tests
    const used = new Set()
    const body = tests === -1 ? src : src.slice(0, tests)
    body.forEach((text, i) => {
      if (!/^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern "C"\s+)?fn\s/.test(text)) return
      let start = i
      while (start > 0 && /^\s*(\/\/\/|#\[)/.test(src[start - 1])) start--
      let depth = 0
      let opened = false
      let end = i
      for (; end < body.length; end++) {
        const code = bare(body[end])
        depth += (code.match(/\{/g) ?? []).length - (code.match(/\}/g) ?? []).length
        if (code.includes('{')) opened = true
        if ((opened && depth <= 0) || (!opened && code.trimEnd().endsWith(';'))) break
      }
      for (let n = i + 1; n <= end + 1; n++) {
        if (lines.has(n)) {
          for (let k = start; k <= end; k++) used.add(k)
          break
        }
      }
    })
    run += used.size
  }
  return { run, whole }
}

function main() {
  if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is needed (apt-get install valgrind)')
  const addon = option('--addon', null) ?? buildDebug()
  const dir = option('--keep', null) ?? fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-walk-'))
  fs.mkdirSync(dir, { recursive: true })
  const out = path.join(dir, 'callgrind.out')
  const jsOut = path.join(dir, 'js.json')
  const r = spawnSync('valgrind', ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${out}`,
    process.execPath, __filename, '--child'], {
    env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: path.resolve(addon), WALK_JS_OUT: jsOut },
    stdio: ['ignore', 'inherit', 'pipe'],
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`the walked process failed:\n${r.stderr.slice(-3000)}`)
  const js = JSON.parse(fs.readFileSync(jsOut, 'utf8'))
  // Thread 1 is the JS thread.
  const rust = rustFiles(`${out}-01`)
  const all = [...js, ...rust]
  console.log(`one acquire on the JS-loop driver, JS call to settled promise: ${all.length} files (${js.length} JS, ${rust.length} Rust)`)
  for (const f of all) console.log(`  ${f}`)
  const { run, whole } = rustLines(`${out}-01`, rust)
  console.log(`the Rust functions that ran: ${run} lines (docs included), in files of ${whole} lines before their unit tests`)
  if (!option('--keep', null)) fs.rmSync(dir, { recursive: true, force: true })
}

if (process.argv.includes('--child')) {
  child().catch((e) => {
    console.error(e)
    process.exit(1)
  })
} else {
  main()
}
