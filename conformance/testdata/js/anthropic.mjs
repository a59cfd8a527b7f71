// Runs one Anthropic Messages scenario with the official Anthropic SDK
// (@anthropic-ai/sdk) and prints its outcome as one JSON line. Usage:
//   node anthropic.mjs <baseURL> <apiKey> <scenario>:<model>
// scenarios: text, stream, tools, image, count, cancel (abort after the
// first text delta), error (any request expected to fail), agent (a
// streamed tool call answered with its result in a second turn), thinking
// (extended thinking asked for: refused where it cannot be expressed),
// models (the model list, page by page, and the model retrieved), model
// (the model retrieved), prefill and prefill-stream (an assistant prefill
// continued).
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, apiKey, scenario] = process.argv.slice(2);
const [kind, model] = scenario.split(":");
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });
const out = { status: 200, terminal: "ok", text: "", events: 0, input: 0, output: 0, stop: null, error: null, requestID: null };

function fail(e) {
  out.terminal = "error";
  out.status = e.status ?? 0;
  out.error = { class: e.constructor?.name ?? "Error", type: e.error?.error?.type ?? e.error?.type ?? null, message: e.message ?? "" };
  out.requestID = e.headers?.get?.("x-request-id") ?? null;
}

const msgs = [{ role: "user", content: "hi" }];
try {
  if (kind === "text" || kind === "error") {
    const { data, response } = await client.messages.create({ model, max_tokens: 64, system: "be brief", messages: msgs }).withResponse();
    out.requestID = response.headers.get("x-request-id");
    out.text = data.content.filter((b) => b.type === "text").map((b) => b.text).join("");
    out.input = data.usage.input_tokens;
    out.output = data.usage.output_tokens;
    out.stop = data.stop_reason;
  } else if (kind === "tools" || kind === "image") {
    const content = kind === "image"
      ? [{ type: "text", text: "what is this?" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }]
      : "what's the weather?";
    const params = { model, max_tokens: 64, messages: [{ role: "user", content }] };
    if (kind === "tools") {
      params.tools = [{ name: "weather", description: "the weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
      params.tool_choice = { type: "auto" };
    }
    const data = await client.messages.create(params);
    out.text = data.content.filter((b) => b.type === "text").map((b) => b.text).join("");
    out.stop = data.stop_reason;
  } else if (kind === "stream" || kind === "cancel") {
    const stream = client.messages.stream({ model, max_tokens: 64, messages: msgs });
    for await (const ev of stream) {
      out.events++;
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") {
        out.text += ev.delta.text;
        if (kind === "cancel") { stream.abort(); out.terminal = "cancelled"; break; }
      }
    }
    if (kind === "stream") {
      const final = await stream.finalMessage();
      out.input = final.usage.input_tokens;
      out.output = final.usage.output_tokens;
      out.stop = final.stop_reason;
    }
  } else if (kind === "agent") {
    const tools = [{ name: "weather", description: "the weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
    const first = await client.messages.stream({ model, max_tokens: 64, tools, messages: [{ role: "user", content: "weather in Paris?" }] }).finalMessage();
    const call = first.content.find((b) => b.type === "tool_use");
    if (!call) throw new Error("no tool_use block: " + JSON.stringify(first.content));
    out.tool = { name: call.name, input: call.input, stop: first.stop_reason };
    const second = await client.messages.create({ model, max_tokens: 64, tools, messages: [
      { role: "user", content: "weather in Paris?" },
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "sunny, 21 C" }] },
    ] });
    out.text = second.content.filter((b) => b.type === "text").map((b) => b.text).join("");
    out.stop = second.stop_reason;
  } else if (kind === "prefill" || kind === "prefill-stream") {
    // A prefill: the answer continues the trailing assistant text.
    const params = { model, max_tokens: 64, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "You said" }] };
    const data = kind === "prefill" ? await client.messages.create(params) : await client.messages.stream(params).finalMessage();
    out.text = data.content.filter((b) => b.type === "text").map((b) => b.text).join("");
    out.stop = data.stop_reason;
  } else if (kind === "thinking") {
    await client.messages.create({ model, max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: msgs });
  } else if (kind === "count") {
    const r = await client.messages.countTokens({ model, messages: msgs });
    out.input = r.input_tokens;
  } else if (kind === "models") {
    // Every page of the model list, one model a page, then the named
    // model retrieved: text is the listed ids, events the pages, stop
    // what the retrieved model says of itself.
    const ids = [];
    let page = await client.models.list({ limit: 1 });
    for (;;) {
      out.events++;
      for (const m of page.data) {
        if (m.type !== "model" || typeof m.created_at !== "string") throw new Error("not a ModelInfo: " + JSON.stringify(m));
        ids.push(m.id);
      }
      if (!page.hasNextPage()) break;
      page = await page.getNextPage();
    }
    out.text = ids.join(",");
    const info = await client.models.retrieve(model);
    out.stop = [info.id, info.display_name, info.lifecycle].join("|");
  } else if (kind === "model") {
    const info = await client.models.retrieve(model);
    out.text = info.id;
  } else {
    throw new Error("unknown scenario " + kind);
  }
} catch (e) {
  if (e instanceof Anthropic.APIUserAbortError) out.terminal = "cancelled";
  else fail(e);
}
console.log(JSON.stringify(out));
