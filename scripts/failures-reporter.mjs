// A node:test reporter that writes one line per failed test: where it is, its name and the
// first line of its error. scripts/test.js runs it beside the spec reporter and prints its
// lines at the end, so a long log (CI's) ends with what failed, not only that something did.
import path from 'node:path'
import { inspect } from 'node:util'

const root = path.resolve(import.meta.dirname, '..')

function firstLine (err) {
  // Whatever a test threw: never let the reporter itself fail the run.
  try {
    const e = err?.cause ?? err
    const text = e instanceof Error ? `${e.code ? `${e.code}: ` : ''}${e.message}` : inspect(e)
    return text.split('\n').find((l) => l.trim()) ?? ''
  } catch {
    return '(an error that cannot be shown)'
  }
}

export default async function * failures (source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue
    let text
    try {
      const { name, file, line, details } = event.data
      // A describe() fails when one of its tests does: the test's own line says enough.
      if (details?.type === 'suite' && details?.error?.failureType === 'subtestsFailed') continue
      const where = file ? `${path.relative(root, file.startsWith('file:') ? new URL(file).pathname : file)}${line ? `:${line}` : ''}` : '?'
      text = `${where} ${JSON.stringify(String(name))}: ${firstLine(details?.error).slice(0, 300)}`
    } catch {
      text = 'a test failed (its details cannot be shown)'
    }
    yield `${text}\n`
  }
}
