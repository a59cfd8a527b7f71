// Streams a chat completion from iop with the official Node SDK (npm "openai").
//   npm install openai && node chat.mjs
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: (process.env.IOP_URL ?? "http://127.0.0.1:8080") + "/v1",
  apiKey: process.env.IOP_API_KEY ?? "unused",
});
const stream = await client.chat.completions.create({
  model: process.env.IOP_MODEL ?? "iop-sim",
  messages: [{ role: "user", content: "Say hello" }],
  stream: true,
});
let finish = "";
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
console.log(`\nfinish_reason=${finish}`);
