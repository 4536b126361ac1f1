// What `npm start` sets for the service besides the operator's environment
// (package.json's start script, docs/operations.md "Configuration"): the
// benches start src/main.ts with node themselves, so they add it and measure
// the service as it runs in production. A NODE_ENV in the bench's own
// environment wins, as it does under npm start.
export const SERVICE_ENV: Record<string, string> = { NODE_ENV: process.env.NODE_ENV || 'production' };
