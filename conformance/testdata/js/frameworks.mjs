// Runs one framework scenario against iop (an OpenAI-compatible base URL)
// and prints its outcome as one JSON line. Usage:
//   node frameworks.mjs <baseURL> <apiKey> <scenario>:<model>
// scenarios:
//   ai-object     Vercel AI SDK generateObject with a zod schema (Chat)
//   ai-object-responses  the same on the Responses API
//   ai-tool       Vercel AI SDK generateText with a zod-typed tool (its
//                 arguments validated against the schema)
//   ai-stream     Vercel AI SDK streamText
//   lc-structured LangChain JS ChatOpenAI.withStructuredOutput (zod)
//   lc-tool       LangChain JS bindTools: a tool call parsed by the schema
//   agents        the OpenAI Agents SDK: an agent calls a zod-typed tool,
//                 the SDK runs it and the model answers from its result
//   li-structured LlamaIndex's OpenAI LLM with a responseFormat schema
//   li-tool       LlamaIndex's OpenAI LLM offered a FunctionTool
//   ollama-embed  ollama-js embed (batch input) and the older embeddings
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, streamText, tool } from "ai";
import { ChatOpenAI } from "@langchain/openai";
import { Agent, run, tool as agentTool, setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";
import { OpenAI as LlamaOpenAI } from "@llamaindex/openai";
import { tool as llamaTool } from "@llamaindex/core/tools";
import OpenAI7 from "openai7";
import { Ollama } from "ollama";
import { z } from "zod";

globalThis.AI_SDK_LOG_WARNINGS = false;
const [baseURL, apiKey, scenario] = process.argv.slice(2);
const [kind, model] = scenario.split(":");
const out = { ok: true, error: null, object: null, text: "", toolCalls: [] };

const weather = z.object({
  city: z.string().min(2),
  unit: z.enum(["celsius", "fahrenheit"]),
  days: z.number().int().min(1).max(7),
  tags: z.array(z.string()).min(1),
});

try {
  if (kind.startsWith("ai-")) {
    const openai = createOpenAI({ baseURL: baseURL + "/v1", apiKey });
    const m = kind === "ai-object-responses" ? openai.responses(model) : openai.chat(model);
    if (kind === "ai-object" || kind === "ai-object-responses") {
      const r = await generateObject({ model: m, schema: weather, prompt: "weather in Paris", maxRetries: 0 });
      out.object = r.object;
    } else if (kind === "ai-tool") {
      const r = await generateText({
        model: m, prompt: "weather in Paris", maxRetries: 0,
        tools: { getWeather: tool({ description: "the weather", inputSchema: weather }) },
      });
      out.toolCalls = r.toolCalls.map((c) => ({ name: c.toolName, input: c.input, invalid: c.invalid ?? false }));
    } else if (kind === "ai-stream") {
      const r = streamText({ model: m, prompt: "hi", maxRetries: 0 });
      for await (const part of r.textStream) out.text += part;
    }
  } else if (kind === "agents") {
    setTracingDisabled(true);
    setDefaultOpenAIClient(new OpenAI7({ baseURL: baseURL + "/v1", apiKey, maxRetries: 0 }));
    const getWeather = agentTool({ name: "getWeather", description: "the weather", parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => { out.toolCalls.push({ name: "getWeather", input: { city }, invalid: false }); return `sunny in ${city}`; } });
    const agent = new Agent({ name: "weather", instructions: "be brief", model, tools: [getWeather] });
    const r = await run(agent, "weather in Paris");
    out.text = String(r.finalOutput);
  } else if (kind === "ollama-embed") {
    const ollama = new Ollama({ host: baseURL });
    const batch = await ollama.embed({ model, input: ["hello", "world"], dimensions: 8 });
    const one = await ollama.embeddings({ model, prompt: "hello" });
    out.object = { batch: batch.embeddings.map((e) => e.length), legacy: one.embedding.length, same: batch.embeddings[0].length === 8 };
  } else if (kind.startsWith("li-")) {
    const llm = new LlamaOpenAI({ model, apiKey, baseURL: baseURL + "/v1", maxRetries: 0 });
    if (kind === "li-structured") {
      const r = await llm.chat({ messages: [{ role: "user", content: "weather in Paris" }], responseFormat: weather });
      out.object = JSON.parse(String(r.message.content));
    } else {
      const t = llamaTool({ name: "getWeather", description: "the weather", parameters: weather, execute: () => "sunny" });
      const r = await llm.chat({ messages: [{ role: "user", content: "weather in Paris" }], tools: [t] });
      out.toolCalls = (r.message.options?.toolCall ?? []).map((c) => ({ name: c.name, input: typeof c.input === "string" ? JSON.parse(c.input) : c.input, invalid: false }));
    }
  } else {
    const llm = new ChatOpenAI({ model, apiKey, configuration: { baseURL: baseURL + "/v1" }, maxRetries: 0 });
    if (kind === "lc-structured") {
      out.object = await llm.withStructuredOutput(weather, { name: "weather" }).invoke("weather in Paris");
    } else if (kind === "lc-tool") {
      const r = await llm.bindTools([{ name: "getWeather", description: "the weather", schema: weather }]).invoke("weather in Paris");
      out.toolCalls = (r.tool_calls ?? []).map((c) => ({ name: c.name, input: c.args, invalid: false }));
      out.invalid = r.invalid_tool_calls ?? [];
    }
  }
} catch (e) {
  out.ok = false;
  out.error = String(e?.message ?? e);
}
console.log(JSON.stringify(out));
