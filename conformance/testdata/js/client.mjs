// Runs one conformance scenario with an official JavaScript client and
// prints its outcome as one JSON line. Usage:
//   node client.mjs <client> <baseURL> <scenario>
// client: openai (the "openai" package of this node_modules: v6 on Node 20,
// or "openai7" for v7 on Node 22) or ollama.
const [clientName, baseURL, scenario] = process.argv.slice(2);

function outcome(extra) {
  return { status: 200, error: null, requestID: null, chunks: 0, text: "", usage: 0, terminal: "ok", ...extra };
}

function apiError(e) {
  return {
    terminal: "error",
    status: e.status ?? 0,
    error: { class: e.constructor?.name ?? "Error", type: e.type ?? e.error?.type ?? null, code: e.code ?? e.error?.code ?? null, param: e.param ?? null },
    requestID: e.requestID ?? e.request_id ?? null,
  };
}

async function openaiScenario(pkg) {
  const { default: OpenAI } = await import(pkg);
  const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "sk-test", maxRetries: 0 });
  const [kind, model] = scenario.split(":");
  const out = outcome({});
  try {
    if (kind === "chat-json") {
      const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }).withResponse();
      out.requestID = r.response.headers.get("x-request-id");
      out.text = r.data.choices[0].message.content ?? "";
      out.usage = r.data.usage?.total_tokens ?? 0;
      out.chunks = 1;
      return out;
    }
    if (kind === "chat-stream" || kind === "chat-usage" || kind === "chat-cancel") {
      const params = { model, stream: true, messages: [{ role: "user", content: "hi" }] };
      if (kind === "chat-usage") params.stream_options = { include_usage: true };
      const { data: stream, response } = await client.chat.completions.create(params).withResponse();
      out.requestID = response.headers.get("x-request-id");
      for await (const chunk of stream) {
        out.chunks++;
        for (const c of chunk.choices ?? []) {
          out.text += c.delta?.content ?? "";
          for (const tc of c.delta?.tool_calls ?? []) out.text += tc.function?.arguments ?? "";
        }
        if (chunk.usage) out.usage = chunk.usage.total_tokens;
        if (kind === "chat-cancel" && out.chunks === 2) { stream.controller.abort(); out.terminal = "cancelled"; break; }
      }
      return out;
    }
    if (kind === "responses-stream") {
      const { data: stream, response } = await client.responses.create({ model, input: "hi", stream: true }).withResponse();
      out.requestID = response.headers.get("x-request-id");
      for await (const ev of stream) {
        out.chunks++;
        if (ev.type === "response.output_text.delta") out.text += ev.delta;
        if (ev.type === "response.completed") out.usage = ev.response.usage?.total_tokens ?? 0;
        if (ev.type === "response.failed" || ev.type === "error") out.terminal = ev.type;
      }
      return out;
    }
    throw new Error("unknown scenario " + scenario);
  } catch (e) {
    return { ...out, ...apiError(e) };
  }
}

async function ollamaScenario() {
  const { Ollama } = await import("ollama");
  const key = process.env.IOP_KEY;
  const client = new Ollama({ host: baseURL, ...(key ? { headers: { Authorization: `Bearer ${key}` } } : {}) });
  const [kind, model] = scenario.split(":");
  const out = outcome({});
  try {
    switch (kind) {
      case "chat-stream": {
        for await (const part of await client.chat({ model, messages: [{ role: "user", content: "hi" }], stream: true })) {
          out.chunks++;
          out.text += part.message.content;
          if (part.done) out.usage = (part.prompt_eval_count ?? 0) + (part.eval_count ?? 0);
        }
        return out;
      }
      case "chat-think": {
        const r = await client.chat({ model, messages: [{ role: "user", content: "hi" }], think: true });
        out.text = `${r.message.thinking ?? ""}|${r.message.content}`;
        out.chunks = 1;
        return out;
      }
      case "chat-json": {
        const r = await client.chat({ model, messages: [{ role: "user", content: "hi" }] });
        out.text = r.message.content;
        out.chunks = 1;
        return out;
      }
      case "generate-stream": {
        for await (const part of await client.generate({ model, prompt: "hi", stream: true })) {
          out.chunks++;
          out.text += part.response;
        }
        return out;
      }
      // A code editor's fill-in-the-middle: the answer goes between the
      // prompt and the suffix.
      case "generate-suffix": {
        const r = await client.generate({ model, prompt: "def f(", suffix: "    return x", stream: false });
        out.text = r.response;
        out.chunks = 1;
        return out;
      }
      // What `ollama run` and `ollama stop` send: a generate request
      // without a prompt (keep_alive 0 to unload); a chat without messages.
      case "load":
      case "unload":
        for await (const part of await client.generate({ model, prompt: "", stream: true, ...(kind === "unload" ? { keep_alive: 0 } : {}) })) {
          out.chunks++;
          out.text += `${part.done}|${part.done_reason}|${part.response}|${part.model}`;
        }
        return out;
      case "load-chat": {
        const r = await client.chat({ model, messages: [] });
        out.chunks = 1;
        out.text = `${r.done}|${r.done_reason}|${r.message.role}|${r.message.content}|${r.model}`;
        return out;
      }
      // `ollama pull`: progress lines, the last "success".
      case "pull":
        for await (const part of await client.pull({ model, stream: true })) {
          out.chunks++;
          out.text += (out.text ? "," : "") + part.status;
        }
        return out;
      case "delete": await client.delete({ model }); out.chunks = 1; return out;
      case "copy": await client.copy({ source: model, destination: `${model}-copy` }); out.chunks = 1; return out;
      case "pull-json": out.text = (await client.pull({ model })).status; out.chunks = 1; return out;
      case "tags": out.text = (await client.list()).models.map((m) => m.name).sort().join(","); return out;
      case "ps": out.chunks = (await client.ps()).models.length; return out;
      case "version": out.text = (await client.version()).version ? "has-version" : ""; return out;
      case "show": out.text = (await client.show({ model })).capabilities ? "has-capabilities" : ""; return out;
    }
    throw new Error("unknown scenario " + scenario);
  } catch (e) {
    return { ...out, terminal: "error", status: e.status_code ?? 0, error: { class: e.name, message: String(e.message).slice(0, 80) } };
  }
}

const result = clientName === "ollama" ? await ollamaScenario() : await openaiScenario(clientName);
process.stdout.write(JSON.stringify(result) + "\n");
