// The schema worker's entry (schema-checks.ts): plain JavaScript, which a worker thread loads on every Node this
// project runs on. A worker does not take the process's TypeScript loader (neither `node --import tsx`'s nor
// vitest's), so it registers tsx's own before loading the worker, TypeScript as the rest of the service.
import { register } from 'tsx/esm/api';

register();
await import('./schema-worker.ts');
