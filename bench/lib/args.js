'use strict'

// The benchmark's arguments, through node:util parseArgs: a missing or bad value
// is an error, never a run with NaN.

const path = require('node:path')
const { parseArgs } = require('node:util')

const SCENARIOS = [1, 2, 3, 4, 5, 6]
const ADDONS = ['auto', 'build', 'repo']

function list(raw, name, check) {
  const items = raw.flatMap((v) => v.split(',')).map((s) => s.trim())
  for (const s of items) if (!check(s)) throw new Error(`--${name}: '${s}' is not valid`)
  return items
}

/** Parsed arguments, or throws an Error whose message is for the user. */
function benchArgs(argv, resultsRoot = path.join(__dirname, '..', 'results')) {
  let values
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        quick: { type: 'boolean' },
        scenario: { type: 'string', short: 's', multiple: true },
        rounds: { type: 'string' },
        only: { type: 'string' },
        addon: { type: 'string' },
        'no-write': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }))
  } catch (e) {
    throw new Error(e.message)
  }
  const a = { quick: Boolean(values.quick), scenarios: [], rounds: null, only: null, addon: values.addon ?? 'auto', write: !values['no-write'], help: Boolean(values.help) }
  if (values.scenario) a.scenarios = list(values.scenario, 'scenario', (s) => SCENARIOS.includes(Number(s))).map(Number)
  if (values.rounds !== undefined) {
    const n = Number(values.rounds)
    if (!/^\d+$/.test(values.rounds) || n < 1) throw new Error(`--rounds: '${values.rounds}' is not a whole number of rounds (1 or more)`)
    a.rounds = n
  }
  if (values.only !== undefined) a.only = list([values.only], 'only', (s) => s.length > 0)
  if (!ADDONS.includes(a.addon) && !a.addon.endsWith('.node')) throw new Error(`--addon: '${a.addon}' is not one of ${ADDONS.join(', ')}`)
  if (a.scenarios.length === 0) a.scenarios = [1, 2, 3, 6, 4, 5]
  // A quick run never replaces the full run's figures docs/performance.md quotes.
  a.resultsDir = a.quick ? path.join(resultsRoot, 'quick') : resultsRoot
  return a
}

module.exports = { benchArgs }
