// Package tenancy is the edge's client tenancy: who may call the API and
// how much of it they may use. It owns
//
//   - the client keys (KeyConfig, stored as SHA-256 hashes) and their
//     authentication (Authenticator: constant-time lookup, keys refused in
//     query strings, failures limited per client address by FailLimiter,
//     which the admin sign-in uses too);
//   - per-key limits and budgets (Tenants: requests and tokens per minute,
//     concurrency, day and month budgets), the reservation an admitted
//     request takes (its prompt estimate and output limit) and its
//     settlement with the usage it was charged;
//   - the shared limits store (Redis: one script per admission and per
//     settlement) and the usage file that keeps usage across restarts;
//   - the per-key status /admin/keys shows.
//
// It imports execution (token usage) and codec (the OpenAI error shape its
// refusals are answered in), never the gateway: the gateway composes its
// configuration section (AuthConfig), calls Admit and End around each
// request, and renders the errors.
package tenancy
