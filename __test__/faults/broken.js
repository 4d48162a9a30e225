'use strict'
// placeholder replaced below
module.exports = { brokenControls: async () => [], BROKEN_MODES: [], brokenEnv: () => ({}) }
