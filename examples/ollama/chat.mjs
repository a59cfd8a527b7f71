// Chats through iop with the Ollama JavaScript client (npm "ollama").
//   npm install ollama && node chat.mjs
import { Ollama } from "ollama";

const ollama = new Ollama({ host: process.env.IOP_URL ?? "http://127.0.0.1:8080" });
const models = await ollama.list();
console.log("models:", models.models.map((m) => m.name).join(", "));
const stream = await ollama.chat({
  model: process.env.IOP_MODEL ?? "iop-sim",
  messages: [{ role: "user", content: "Say hello" }],
  stream: true,
});
for await (const part of stream) {
  process.stdout.write(part.message.content);
  if (part.done) console.log(`\ndone_reason=${part.done_reason}`);
}
