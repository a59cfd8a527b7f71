// Makes n chat completions with the official openai-node client (its
// default retries on) against a key limited to fewer requests, and prints
// what happened: {"ok": answers, "calls": HTTP requests, "status429": n}.
// Usage: node ratelimit.mjs <baseURL> <apiKey> <n>
import OpenAI from "openai";

const [baseURL, apiKey, n] = process.argv.slice(2);
let calls = 0, status429 = 0;
const client = new OpenAI({
  baseURL, apiKey,
  fetch: async (url, init) => {
    calls++;
    const r = await fetch(url, init);
    if (r.status === 429) status429++;
    return r;
  },
});
let ok = 0;
for (let i = 0; i < Number(n); i++) {
  const c = await client.chat.completions.create({ model: "iop-sim", messages: [{ role: "user", content: "hi" }] });
  if (c.choices?.[0]?.message?.content) ok++;
}
console.log(JSON.stringify({ ok, calls, status429 }));
