'use strict';
// Drives npm ali-ons (a pure JavaScript RocketMQ remoting client) against a namesrv given on the command line:
//   node peer.js NAMESRV NAME
// Scenarios run one after another; each prints "RESULT scenario key=value ..." or "FAIL scenario error".
// Every wait is bounded (deadline()), and the process exits by itself.
const { Producer, Consumer, Message } = require('ali-ons');

const [namesrv, name] = process.argv.slice(2);
// ali-ons fetches the namesrv list over HTTP unless nameSrv is set; the client still insists on an httpclient.
const common = { nameSrv: namesrv, httpclient: {}, persistConsumerOffsetInterval: 1000, rebalanceInterval: 2000 };
const quietLogger = { debug() {}, info() {}, warn() {}, error() {} };

// what: a text, or a function returning one (the state at the deadline, for the failure report)
function deadline(ms, what) {
  return new Promise((_, reject) => setTimeout(
    () => reject(new Error(`timed out: ${typeof what === 'function' ? what() : what}`)), ms).unref());
}

function waitFor(predicate, ms, what) {
  return Promise.race([deadline(ms, what), (async () => {
    while (!predicate()) await new Promise(resolve => setTimeout(resolve, 50));
  })()]);
}

async function produceAndConsume(producer) {
  const topic = `${name}-plain`;
  const queues = new Set();
  const sent = [];
  for (let i = 0; i < 20; i++) {
    const message = new Message(topic, i % 2 ? 'TagB' : 'TagA', `ali-${i}`);
    message.keys = [`key-${i}`];
    const result = await producer.send(message);
    if (result.sendStatus !== 'SEND_OK') throw new Error(`send status ${result.sendStatus}`);
    queues.add(result.messageQueue.queueId);
    sent.push(result.msgId);
  }
  const consumer = new Consumer({ ...common, logger: quietLogger, consumerGroup: `${name}-plain-group`,
    instanceName: `${name}-plain`, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  const bodies = [];
  let tagged = 0;
  consumer.subscribe(topic, 'TagA', async msg => {
    bodies.push(msg.body.toString());
    if (msg.tags === 'TagA' && msg.keys.includes(`key-${msg.body.toString().slice(4)}`)) tagged++;
  });
  try {
    await waitFor(() => bodies.length >= 10, 30000, () => `ten TagA messages, got ${bodies}`);
    await new Promise(resolve => setTimeout(resolve, 300));   // anything more (a TagB) would arrive now
  } finally {
    await consumer.close();
  }
  const distinct = new Set(bodies);
  console.log(`RESULT produce_consume sent=${sent.length} queues=${queues.size} consumed=${bodies.length} ` +
              `distinct=${distinct.size} tagged=${tagged} first=${[...distinct].sort()[0]}`);
}

async function retry(producer) {
  const topic = `${name}-retry`;
  for (let i = 0; i < 3; i++) await producer.send(new Message(topic, 'T', i === 0 ? 'bad' : `good-${i}`));
  const consumer = new Consumer({ ...common, logger: quietLogger, consumerGroup: `${name}-retry-group`,
    instanceName: `${name}-retry`, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  const deliveries = [];
  consumer.subscribe(topic, '*', async msg => {
    const body = msg.body.toString();
    deliveries.push(`${body}@${msg.reconsumeTimes}`);
    // the bad message fails twice: each failure goes back to the broker (CONSUMER_SEND_MSG_BACK) and returns
    // through %RETRY%group after a delay level. It throws: ali-ons drops the ACTION_RETRY answer of a message
    // that came from %RETRY% (its retry-topic handler does not return the user handler's value).
    if (body === 'bad' && msg.reconsumeTimes < 2) throw new Error(`failing ${body} on purpose`);
  });
  let handlerErrors = 0;
  consumer.on('error', err => {
    if (err.message.includes('failing bad on purpose')) handlerErrors++;
    else console.log(`retry consumer error: ${err.message}`);
  });
  try {
    await waitFor(() => deliveries.includes('bad@2') && deliveries.length >= 5, 40000, () => `the third delivery of bad, got ${deliveries}`);
  } finally {
    await consumer.close();
  }
  console.log(`RESULT retry deliveries=${deliveries.length} errors=${handlerErrors} bad=${deliveries.filter(d => d.startsWith('bad')).join(',')}`);
}

async function main() {
  const producer = new Producer({ ...common, logger: quietLogger, producerGroup: `${name}-producer`,
    instanceName: `${name}-producer` });
  await producer.ready();
  let failed = 0;
  try {
    for (const [scenario, run] of [['produce_consume', produceAndConsume], ['retry', retry]]) {
      try {
        await run(producer);
      } catch (err) {
        failed++;
        console.log(`FAIL ${scenario} ${err.stack}`);
      }
    }
  } finally {
    await producer.close();
  }
  process.exit(failed ? 1 : 0);
}

Promise.race([main(), deadline(120000, 'the whole run')]).catch(err => {
  console.log(`FAIL run ${err.stack}`);
  process.exit(2);
});
