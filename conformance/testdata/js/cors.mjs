// Loads a page from one origin whose script calls iop on another, in
// headless Chromium, and prints what the page saw: {"result": "..."}.
// Usage: node cors.mjs <pageURL>
import { chromium } from "playwright-core";

const [pageURL] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.goto(pageURL);
  await page.waitForSelector("#result:not(:empty)", { timeout: 15000 });
  console.log(JSON.stringify({ result: await page.textContent("#result") }));
} finally {
  await browser.close();
}
