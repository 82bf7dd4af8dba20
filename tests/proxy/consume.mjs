// A Node.js client of the proxy (fetch only): produces the messages given on the command line, then consumes
// until it has seen them all, acking each batch; prints the values it consumed as one JSON array.
const [base, producer, consumer, ...values] = process.argv.slice(2);
const produced = await fetch(`${base}/produce`, {
  method: "POST", headers: {"content-type": "application/json"},
  body: JSON.stringify({producer, messages: values.map((value) => ({value, headers: {lang: "js"}}))}),
});
if (produced.status !== 200) throw new Error(`produce answered ${produced.status}: ${await produced.text()}`);
const seen = [];
for (let round = 0; round < 50 && !values.every((value) => seen.includes(value)); round++) {
  const answer = await (await fetch(`${base}/message?consumer=${consumer}&wait_ms=2000&max=2`)).json();
  if (!answer.ok) throw new Error(JSON.stringify(answer));
  for (const message of answer.messages) seen.push(message.value);
  if (answer.token) {
    const acked = await fetch(`${base}/ack`, {method: "POST", headers: {"content-type": "application/json"},
                                             body: JSON.stringify({consumer, token: answer.token})});
    if (acked.status !== 200) throw new Error(`ack answered ${acked.status}`);
  }
}
console.log(JSON.stringify(seen));
