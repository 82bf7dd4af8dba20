// nsqjs 0.13.0 against an nsqd (the embedded broker's): a Writer publishes (PUB, MPUB, DPUB), two Readers on one
// channel consume; with "full", one message is requeued, one is left to time out, one is kept alive by TOUCH past
// its timeout (with 1 s heartbeats, which nsqjs answers: nsqd closes a connection silent for two intervals).
// Prints one JSON line: {"deliveries": [[body, attempts, reader], ...]}.
// Usage: node nsqjs_peer.js '{"nsqd": "127.0.0.1:4150", "topic": "t", "count": 20, "full": true,
//                             "options": {"deflate": true, "tls": true, "caFile": "/path/ca.pem"}}'
'use strict'
const fs = require('fs')
const nsq = require('nsqjs')

const settings = JSON.parse(process.argv[2])
const [host, port] = settings.nsqd.split(':')
const options = Object.assign({}, settings.options || {})
if (options.caFile) {
  options.ca = fs.readFileSync(options.caFile)
  delete options.caFile
}
const readerOptions = Object.assign({ nsqdTCPAddresses: [settings.nsqd], maxInFlight: 5, heartbeatInterval: 1,
  messageTimeout: 1000 }, options)
const bodies = []
for (let i = 0; i < settings.count; i++) bodies.push(`m${i}`)
const special = settings.full ? ['requeue-me', 'timeout-me', 'touch-me'] : []
const expected = bodies.length + special.length + 1                     // + the deferred one
const deliveries = []
const finished = new Set()
const readers = []

function fail (what) {
  process.stderr.write(`nsqjs peer: ${what}\n`)
  process.exit(2)
}

const guard = setTimeout(() => fail(`timed out with ${finished.size} of ${expected} finished: ` +
  JSON.stringify(deliveries)), 20000)

function done () {
  clearTimeout(guard)
  // Let late deliveries (a redelivery that should not happen) arrive before reporting.
  setTimeout(() => {
    process.stdout.write(JSON.stringify({ deliveries }) + '\n')
    for (const reader of readers) reader.close()
    writer.close()
    setTimeout(() => process.exit(0), 100)
  }, settings.full ? 500 : 50)
}

function handle (message, index) {
  const body = message.body.toString()
  deliveries.push([body, message.attempts, index])
  if (body === 'requeue-me' && message.attempts === 1) {
    message.requeue(0, false)
    return
  }
  if (body === 'timeout-me' && message.attempts === 1) return          // nsqd times it out: it comes again
  if (body === 'touch-me') {
    // 1.6 s in all with a 1 s timeout: alive only through the touches
    setTimeout(() => message.touch(), 500)
    setTimeout(() => message.touch(), 1000)
    setTimeout(() => finish(message, body), 1600)
    return
  }
  finish(message, body)
}

function finish (message, body) {
  message.finish()
  finished.add(body)
  if (finished.size === expected) done()
}

const writer = new nsq.Writer(host, Number(port), options)
writer.on('error', (err) => fail(`writer: ${err}`))
writer.on('ready', () => {
  writer.publish(settings.topic, bodies.slice(0, bodies.length / 2), (err) => {
    if (err) fail(`MPUB: ${err}`)
    for (const body of bodies.slice(bodies.length / 2).concat(special)) {
      writer.publish(settings.topic, body, (err) => { if (err) fail(`PUB: ${err}`) })
    }
    writer.deferPublish(settings.topic, ['deferred'], 200, (err) => { if (err) fail(`DPUB: ${err}`) })
    for (let index = 0; index < 2; index++) {
      const reader = new nsq.Reader(settings.topic, 'nsqjs', readerOptions)
      reader.on('message', (message) => handle(message, index))
      reader.on('error', (err) => fail(`reader: ${err}`))
      reader.connect()
      readers.push(reader)
    }
  })
})
writer.connect()
