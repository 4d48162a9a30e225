'use strict'
// `const Redlock = require('lockdog/redlock')`: the redlock v5 API on lockdog.
module.exports = require('./lib/adapters/redlock')
