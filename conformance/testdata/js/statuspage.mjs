// Drives the admin status page in headless Chromium: the provider rows
// appear; a request makes node-a/sim-flaky stall; the page shows it
// unavailable, then recovered. Usage: node statuspage.mjs <adminURL> <apiURL>
import { chromium } from "playwright-core";

const [adminURL, apiURL] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const steps = [];
try {
  const page = await browser.newPage();
  await page.goto(adminURL + "/status");
  const row = (id) => `#providers tbody tr:has(td:text-is("${id}"))`;
  await page.waitForSelector(`${row("node-a/sim-flaky")} td.available`, { timeout: 10000 });
  await page.waitForSelector(`${row("node-a/steady")} td.available`, { timeout: 10000 });
  // Each provider shows the surfaces it serves natively (the sim's: all).
  await page.waitForSelector(`${row("node-a/steady")} td:has-text("messages, audio")`, { timeout: 10000 });
  steps.push("rows");
  const res = await fetch(apiURL + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "iop-sim", messages: [{ role: "user", content: "hi" }] }),
  });
  if (res.status !== 200) throw new Error("request status " + res.status);
  steps.push("request");
  await page.waitForSelector(`${row("node-a/sim-flaky")} td.unavailable`, { timeout: 10000 });
  await page.waitForSelector(`#events tbody tr:has(td:text-is("node-a/sim-flaky"))`, { timeout: 10000 });
  steps.push("unavailable");
  await page.waitForSelector(`${row("node-a/sim-flaky")} td.available`, { timeout: 20000 });
  steps.push("recovered");
  await page.screenshot({ path: process.env.SCREENSHOT ?? "/dev/null" }).catch(() => {});
  console.log(JSON.stringify({ ok: true, steps }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, steps, error: String(e.message).slice(0, 300) }));
} finally {
  await browser.close();
}
