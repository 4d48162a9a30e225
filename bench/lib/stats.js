'use strict'

function sorted(xs) {
  return Float64Array.from(xs).sort()
}

/** Nearest-rank percentile of an already sorted array. */
function pct(sortedXs, p) {
  if (sortedXs.length === 0) return NaN
  const i = Math.min(sortedXs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedXs.length) - 1))
  return sortedXs[i]
}

function median(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x))
  if (v.length === 0) return null
  const s = sorted(v)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

function mean(xs) {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN
}

/** Jain's fairness index: (Σx)² / (n·Σx²); 1 = perfectly even, 1/n = one worker got everything. */
function jain(xs) {
  const s = xs.reduce((a, b) => a + b, 0)
  const s2 = xs.reduce((a, b) => a + b * b, 0)
  return s2 === 0 ? NaN : (s * s) / (xs.length * s2)
}

function shuffle(xs, rnd = Math.random) {
  const a = xs.slice()
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

module.exports = { sorted, pct, median, mean, jain, shuffle }
